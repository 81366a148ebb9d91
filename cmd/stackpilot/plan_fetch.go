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

	"github.com/stackpilot/stackpilot/internal/plan"
)

// The controller serves full plans beside the engine logs, on its HTTPS logs
// listener, to callers who may get the Stack; the Service in config/manager
// exposes it under the port name "logs" (logsPortName).
const (
	defaultControllerNamespace = "stackpilot-system"
	defaultControllerService   = "stackpilot-controller"
	// maxPlanBytes bounds a Document read: a plan of 100,000 resources is
	// some tens of MiB; a larger answer is not a plan.
	maxPlanBytes = 64 << 20
	// planFetchTimeout bounds one read; the fallback is there for a
	// controller that does not answer.
	planFetchTimeout = 15 * time.Second
)

// controllerOptions say where the controller's /plans endpoint is: through
// the API server's service proxy by default, or straight at --controller-url;
// and which bearer token to present to it.
type controllerOptions struct {
	url       string
	namespace string
	service   string
	token     string
	caFile    string
	insecure  bool
}

func (o *controllerOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.url, "controller-url", "", "Read the plan from the controller at this URL (https://host:port of its logs address) instead of through the API server's service proxy.")
	fs.StringVar(&o.namespace, "controller-namespace", defaultControllerNamespace, "Namespace of the controller's Service (for the service proxy).")
	fs.StringVar(&o.service, "controller-service", defaultControllerService, "Name of the controller's Service, port \"logs\" (for the service proxy).")
	fs.StringVar(&o.token, "token", "", "Bearer token to present to the controller (default: the kubeconfig user's).")
	fs.StringVar(&o.caFile, "controller-ca-file", "", "With --controller-url: the CA certificate (PEM) the controller's certificate is checked against.")
	fs.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "With --controller-url: do not check the controller's certificate (it is self-signed unless the controller has --logs-cert-dir).")
}

// planFetcher reads plan Documents from the controller.
type planFetcher struct {
	base   *url.URL // up to, without, /plans
	client *http.Client
	// via names the way in, for messages.
	via string
	// proxied: the answers may be the API server's, not the controller's.
	proxied bool
	// token is presented to the controller (TokenHeader); tokenErr says why
	// there is none, for the controller's 401.
	token    string
	tokenErr error
}

// planFetcher finds the way to the controller as `stackpilot logs` does
// (the same listener), and the token the controller checks: --token, else
// the kubeconfig user's. Without one the request goes anyway: a server
// given with --controller-url may not ask, and the controller's 401 is
// explained with why there was none.
func (c *cli) planFetcher(o controllerOptions) (*planFetcher, error) {
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErrorf("--controller-url %q: want https://host:port", o.url)
		}
	}
	if o.url == "" && (o.namespace == "" || o.service == "") {
		return nil, usageErrorf("--controller-namespace and --controller-service must not be empty")
	}
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	ep, err := logsEndpointFor(cfg, &logsOptions{url: o.url, namespace: o.namespace, service: o.service, caFile: o.caFile, insecure: o.insecure})
	if err != nil {
		return nil, err
	}
	f := &planFetcher{base: ep.base, client: ep.client, via: ep.via, proxied: ep.proxied, token: o.token}
	if f.token == "" {
		f.token, f.tokenErr = bearerToken(cfg)
	}
	return f, nil
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
	if f.token != "" {
		req.Header.Set(logsTokenHeader, f.token)
	}
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
		return nil, f.statusError(resp.StatusCode, body, ns, name)
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

// statusError explains a refused read: the controller's own answers (JSON
// {"error": ...}: no such plan, a token it did not accept, no get on the
// Stack), or the API server's on the way to it.
func (f *planFetcher) statusError(code int, body []byte, ns, name string) error {
	var ctrl struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &ctrl) == nil && ctrl.Error != "" {
		switch code {
		case http.StatusNotFound:
			return &planNotFoundError{msg: fmt.Sprintf("%s has no such plan: %s", f.via, ctrl.Error)}
		case http.StatusForbidden:
			return fmt.Errorf("not allowed to read the plans of Stack %s/%s: %s; ask for get on stacks.stackpilot.dev in namespace %s", ns, name, ctrl.Error, ns)
		case http.StatusUnauthorized:
			why := "pass a valid one with --token (e.g. from `kubectl create token`)"
			if f.tokenErr != nil {
				why = f.tokenErr.Error()
			}
			return fmt.Errorf("the controller did not accept your token: %s; %s", ctrl.Error, why)
		}
		return fmt.Errorf("%s answered %d %s: %s", f.via, code, http.StatusText(code), ctrl.Error)
	}
	if f.proxied {
		if err := proxyStatusError(f.via, "is the controller running, with --logs-bind-address?", code, body); err != nil {
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
