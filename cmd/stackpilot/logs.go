package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

const (
	// logsPortName is the controller Service's HTTPS port serving the logs.
	logsPortName = "logs"
	// logsTokenHeader carries the caller's token to the controller: the API
	// server's service proxy strips Authorization after using it.
	logsTokenHeader = "X-Stackpilot-Token"
)

// logsOptions are the flags of `stackpilot logs`.
type logsOptions struct {
	operation string
	follow    bool
	token     string
	// where the controller is
	url, namespace, service string
	caFile                  string
	insecure                bool
}

func (c *cli) newLogsCmd() *cobra.Command {
	o := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs STACK",
		Short: "Print Pulumi's output of the Stack's last operation (or of one named)",
		Long: `Prints what Pulumi printed during one of the Stack's recent operations (what
` + "`pulumi up`" + ` shows: the resources, their changes, the outputs, the errors), as the
controller keeps it: the last 10 operations of each Stack, each at most 1 MiB
(its beginning and end), every secret value replaced by [secret], no colour.

Without --operation, the last operation that has a log (the running one, if
any); the IDs are in ` + "`kubectl get stack STACK -o jsonpath='{.status.history[*].id}'`" + `.
--follow streams a running operation's output until it ends.

The controller serves the logs over HTTPS; the CLI reaches it through the API
server's service proxy (service stackpilot-controller, port logs, in
stackpilot-system) and presents the kubeconfig user's bearer token, which the
controller checks: reading a Stack's logs needs get on that Stack (and get on
services/proxy for the proxy). A kubeconfig user with a client certificate has
no token: pass one with --token.`,
		Example: `  stackpilot logs web -n infra
  stackpilot logs web --operation up-20260101-120000-1a2b3c4d
  stackpilot logs web --follow`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			return c.logs(ctx, args[0], o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.operation, "operation", "", "The operation whose output to print (an ID of status.history; default: the last one).")
	fs.BoolVarP(&o.follow, "follow", "f", false, "Stream a running operation's output until it ends.")
	fs.StringVar(&o.token, "token", "", "Bearer token to present to the controller (default: the kubeconfig user's).")
	fs.StringVar(&o.url, "controller-url", "", "Read the logs from the controller at this URL (https://host:port of its logs address) instead of through the API server's service proxy.")
	fs.StringVar(&o.namespace, "controller-namespace", defaultControllerNamespace, "Namespace of the controller's Service (for the service proxy).")
	fs.StringVar(&o.service, "controller-service", defaultControllerService, "Name of the controller's Service, port \"logs\" (for the service proxy).")
	fs.StringVar(&o.caFile, "controller-ca-file", "", "With --controller-url: the CA certificate (PEM) the controller's certificate is checked against.")
	fs.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "With --controller-url: do not check the controller's certificate (it is self-signed unless the controller has --logs-cert-dir).")
	return cmd
}

func (c *cli) logs(ctx context.Context, name string, o *logsOptions) error {
	if o.url == "" && (o.namespace == "" || o.service == "") {
		return usageErrorf("--controller-namespace and --controller-service must not be empty")
	}
	g, err := c.stackGetter()
	if err != nil {
		return err
	}
	// First the Stack itself: a wrong name or namespace gets the one message
	// every verb gives ("did you mean -n platform?"). Not being allowed to
	// read it is for the controller to say, the way it says it for its logs.
	key := client.ObjectKey{Namespace: g.ns, Name: name}
	if err := g.cl.Get(ctx, key, &v1alpha1.Stack{}); err != nil && !apierrors.IsForbidden(err) {
		return g.explain(ctx, name, err)
	}
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return err
	}
	token := o.token
	if token == "" {
		if token, err = bearerToken(cfg); err != nil {
			return err
		}
	}
	ep, err := logsEndpointFor(cfg, o)
	if err != nil {
		return err
	}
	q := url.Values{}
	if o.operation != "" {
		q.Set("operation", o.operation)
	}
	if o.follow {
		q.Set("follow", "1")
	}
	u := ep.base.JoinPath("logs", key.Namespace, key.Name)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(logsTokenHeader, token)
	resp, err := ep.client.Do(req)
	if err != nil {
		return fmt.Errorf("reaching %s: %w", ep.via, unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ep.statusError(resp.StatusCode, body, key.Namespace, key.Name)
	}
	if _, err := io.Copy(c.stdout, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the log from %s: %w", ep.via, err)
	}
	return nil
}

// logsEndpoint is the way to the controller's logs listener.
type logsEndpoint struct {
	base    *url.URL // up to, without, /logs
	client  *http.Client
	via     string // for messages
	proxied bool   // the answers may be the API server's
}

func logsEndpointFor(cfg *rest.Config, o *logsOptions) (*logsEndpoint, error) {
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, usageErrorf("--controller-url %q: want https://host:port", o.url)
		}
		tlsConfig := &tls.Config{InsecureSkipVerify: o.insecure} //nolint:gosec // asked for by --insecure-skip-tls-verify
		if o.caFile != "" {
			pem, err := os.ReadFile(o.caFile)
			if err != nil {
				return nil, fmt.Errorf("--controller-ca-file: %w", err)
			}
			tlsConfig.RootCAs = x509.NewCertPool()
			if !tlsConfig.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--controller-ca-file %s holds no PEM certificate", o.caFile)
			}
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsConfig
		return &logsEndpoint{base: u, client: &http.Client{Transport: tr}, via: "the controller at " + u.Redacted()}, nil
	}
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// No client timeout: --follow reads as long as the operation runs;
	// Ctrl-C ends it.
	return &logsEndpoint{
		base:    host.JoinPath("api/v1/namespaces", o.namespace, "services", "https:"+o.service+":"+logsPortName, "proxy"),
		client:  hc,
		via:     fmt.Sprintf("service %s/%s (port %s) through the API server", o.namespace, o.service, logsPortName),
		proxied: true,
	}, nil
}

// statusError explains a refused read: the controller's own answers (JSON
// {"error": ...}), or the API server's on the way to it.
func (e *logsEndpoint) statusError(code int, body []byte, ns, name string) error {
	var ctrl struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &ctrl) == nil && ctrl.Error != "" {
		switch code {
		case http.StatusForbidden:
			return fmt.Errorf("not allowed to read the logs of Stack %s/%s: %s; ask for get on stacks.stackpilot.dev in namespace %s", ns, name, ctrl.Error, ns)
		case http.StatusUnauthorized:
			return fmt.Errorf("the controller did not accept your token: %s; pass a valid one with --token (e.g. from `kubectl create token`)", ctrl.Error)
		case http.StatusNotFound:
			return &exitError{code: 1, msg: ctrl.Error}
		}
		return fmt.Errorf("%s answered %d %s: %s", e.via, code, http.StatusText(code), ctrl.Error)
	}
	if e.proxied {
		if err := proxyStatusError(e.via, "is the controller running, with --logs-bind-address?", code, body); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s answered %d %s: %s", e.via, code, http.StatusText(code), shortBody(body))
}

// bearerToken is the token the kubeconfig's user presents to the API server,
// whatever its source (a token, a token file, an exec plugin, an auth
// provider): client-go's auth layers put it in the Authorization header of
// a request, which a transport of our own, innermost, reads and does not
// send anywhere.
func bearerToken(cfg *rest.Config) (string, error) {
	cfg = rest.CopyConfig(cfg)
	var header string
	cfg.Wrap(func(http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			header = req.Header.Get("Authorization")
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		})
	})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	resp, err := hc.Get(host.String())
	if err != nil {
		return "", fmt.Errorf("kubeconfig: getting the user's token: %w", unwrapURLError(err))
	}
	_ = resp.Body.Close()
	if token, ok := strings.CutPrefix(header, "Bearer "); ok && strings.TrimSpace(token) != "" {
		return strings.TrimSpace(token), nil
	}
	return "", errors.New("the kubeconfig user has no bearer token (a client certificate, or basic auth), and the controller checks tokens only: " +
		"pass one with --token, e.g. --token \"$(kubectl create token <serviceaccount> -n <namespace>)\" for a ServiceAccount allowed to get the Stack")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
