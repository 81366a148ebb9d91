package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/stackpilot/stackpilot/internal/plan"
)

// The controller serves full plans on its metrics address; the Service in
// config/manager exposes it under this port name.
const (
	defaultControllerNamespace = "stackpilot-system"
	defaultControllerService   = "stackpilot-controller"
	controllerPortName         = "metrics"
	// maxPlanBytes bounds a Document read: a plan of 100,000 resources is
	// some tens of MiB; a larger answer is not a plan.
	maxPlanBytes = 64 << 20
	// planFetchTimeout bounds one read; the fallback is there for a
	// controller that does not answer.
	planFetchTimeout = 15 * time.Second
)

// controllerOptions say where the controller's /plans endpoint is: through
// the API server's service proxy by default, or straight at --controller-url.
type controllerOptions struct {
	url       string
	namespace string
	service   string
}

func (o *controllerOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.url, "controller-url", "", "Read the plan from the controller at this URL (http://host:port of its metrics address) instead of through the API server's service proxy.")
	fs.StringVar(&o.namespace, "controller-namespace", defaultControllerNamespace, "Namespace of the controller's Service (for the service proxy).")
	fs.StringVar(&o.service, "controller-service", defaultControllerService, "Name of the controller's Service, port \"metrics\" (for the service proxy).")
}

// planFetcher reads plan Documents from the controller.
type planFetcher struct {
	base   *url.URL // up to, without, /plans
	client *http.Client
	// via names the way in, for messages.
	via string
	// proxied: the answers may be the API server's, not the controller's.
	proxied bool
}

func (c *cli) planFetcher(o controllerOptions) (*planFetcher, error) {
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErrorf("--controller-url %q: want http://host:port or https://host:port", o.url)
		}
		return &planFetcher{base: u, client: &http.Client{Timeout: planFetchTimeout}, via: "the controller at " + u.Redacted()}, nil
	}
	if o.namespace == "" || o.service == "" {
		return nil, usageErrorf("--controller-namespace and --controller-service must not be empty")
	}
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	hc.Timeout = planFetchTimeout
	return &planFetcher{
		base:    host.JoinPath("api/v1/namespaces", o.namespace, "services", o.service+":"+controllerPortName, "proxy"),
		client:  hc,
		via:     fmt.Sprintf("service %s/%s (port %s) through the API server", o.namespace, o.service, controllerPortName),
		proxied: true,
	}, nil
}

// planNotFoundError is the controller's own 404: it runs, but holds no such
// plan (replaced, applied, or its data dir was lost).
type planNotFoundError struct{ msg string }

func (e *planNotFoundError) Error() string { return e.msg }

// fetch reads plan id of Stack ns/name. Every error says what to check; the
// caller falls back to status.pendingPlan on any of them.
func (f *planFetcher) fetch(ctx context.Context, ns, name, id string) (*plan.Document, error) {
	u := f.base.JoinPath("plans", ns, name, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching %s: %w", f.via, unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the plan from %s: %w", f.via, err)
	}
	if len(body) > maxPlanBytes {
		return nil, fmt.Errorf("%s answered more than %d MiB: not a plan", f.via, maxPlanBytes>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, f.statusError(resp.StatusCode, body)
	}
	var d plan.Document
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("%s answered something that is not a plan: %v", f.via, err)
	}
	switch {
	case d.APIVersion != plan.APIVersion:
		return nil, fmt.Errorf("%s answered a plan of apiVersion %q; this CLI reads %s: use a CLI of the controller's version", f.via, d.APIVersion, plan.APIVersion)
	case d.ID != id || d.Namespace != ns || d.Name != name:
		return nil, fmt.Errorf("%s answered plan %s of %s/%s, not plan %s of %s/%s", f.via, d.ID, d.Namespace, d.Name, id, ns, name)
	}
	return &d, nil
}

// statusError explains a refused read: the controller's 404 (its JSON
// {"error": ...}), or the API server's own answers on the way to it.
func (f *planFetcher) statusError(code int, body []byte) error {
	var ctrl struct {
		Error string `json:"error"`
	}
	if code == http.StatusNotFound && json.Unmarshal(body, &ctrl) == nil && ctrl.Error != "" {
		return &planNotFoundError{msg: fmt.Sprintf("%s has no such plan: %s", f.via, ctrl.Error)}
	}
	if f.proxied {
		if err := proxyStatusError(f.via, "is the controller running?", code, body); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s answered %d %s: %s", f.via, code, http.StatusText(code), shortBody(body))
}

// proxyStatusError explains the answers that come from the API server's
// service proxy rather than the controller (no right to the proxy, no such
// Service, no endpoint answering), each with its fix; nil for any other
// code. running is the question to ask when nothing answers.
func proxyStatusError(via, running string, code int, body []byte) error {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("not allowed to reach %s: ask for get on services/proxy there, or pass --controller-url", via)
	case http.StatusNotFound:
		return fmt.Errorf("no %s: is Stackpilot installed there? (else pass --controller-namespace and --controller-service, or --controller-url)", via)
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return fmt.Errorf("%s did not answer (%s): %s", via, running, shortBody(body))
	}
	return nil
}

// shortBody is the first line of an answer, for messages.
func shortBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(no body)"
	}
	return s
}

// unwrapURLError drops net/http's `Get "<url>": ` prefix: the message
// already names where it went.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
