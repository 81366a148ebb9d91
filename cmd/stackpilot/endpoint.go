package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/wire"
)

// The controller serves the engine logs and the full plans on its HTTPS
// listener, to callers who may get the Stack; the Service in config/manager
// exposes it under the port name wire.PortName. This file is the CLI's way
// there: through the API server's service proxy by default, or straight at
// --controller-url, with a bearer token the controller checks.
const (
	defaultControllerNamespace = "stackpilot-system"
	defaultControllerService   = "stackpilot-controller"
)

// controllerOptions say where the controller's listener is, and which
// bearer token to present to it.
type controllerOptions struct {
	url       string
	namespace string
	service   string
	token     string
	caFile    string
	insecure  bool
}

// addFlags registers the options; what is what the command reads there
// ("the logs", "the plan"), for --controller-url's help.
func (o *controllerOptions) addFlags(fs *pflag.FlagSet, what string) {
	fs.StringVar(&o.url, "controller-url", "", "Read "+what+" from the controller at this URL (https://host:port of its logs address) instead of through the API server's service proxy.")
	fs.StringVar(&o.namespace, "controller-namespace", defaultControllerNamespace, "Namespace of the controller's Service (for the service proxy).")
	fs.StringVar(&o.service, "controller-service", "", "Name of the controller's Service, port \""+wire.PortName+"\" (for the service proxy; default: "+defaultControllerService+", or "+defaultControllerService+"-<shard> for a Stack labelled "+v1alpha1.ShardLabel+"=<shard>).")
	fs.StringVar(&o.token, "token", "", "Bearer token to present to the controller (default: the kubeconfig user's).")
	fs.StringVar(&o.caFile, "controller-ca-file", "", "With --controller-url: the CA certificate (PEM) the controller's certificate is checked against.")
	fs.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "With --controller-url: do not check the controller's certificate (it is self-signed unless the controller has --logs-cert-dir).")
}

// checkService refuses an empty --controller-namespace when it is the way
// in.
func (o *controllerOptions) checkService() error {
	if o.url == "" && o.namespace == "" {
		return usageErrorf("--controller-namespace must not be empty")
	}
	return nil
}

// check refuses options that cannot name a way in, before anything is read;
// it returns --controller-url parsed (nil without one).
func (o *controllerOptions) check() (*url.URL, error) {
	var direct *url.URL
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErrorf("--controller-url %q: want https://host:port", o.url)
		}
		direct = u
	}
	return direct, o.checkService()
}

// forStack is o with the Service of the controller that serves stack, unless
// --controller-service named one: a sharded install's shard K runs its
// operations, and so holds their logs and plans, behind the Service
// stackpilot-controller-K (`stackpilot install --shards`, the chart's
// shards). stack may be nil (not readable): the main controller's then.
func (o controllerOptions) forStack(stack *v1alpha1.Stack) controllerOptions {
	if o.service != "" {
		return o
	}
	o.service = defaultControllerService
	if stack != nil {
		if shard := stack.Labels[v1alpha1.ShardLabel]; shard != "" {
			o.service = defaultControllerService + "-" + shard
		}
	}
	return o
}

// endpoint is the way to the controller's listener.
type endpoint struct {
	base   *url.URL // the listener's root: wire's URL builders add the paths
	client *http.Client
	// via names the way in, for messages.
	via string
	// proxied: the answers may be the API server's, not the controller's.
	proxied bool
	// token is presented to the controller (wire.TokenHeader); tokenErr
	// says why there is none, for the controller's 401.
	token    string
	tokenErr error
}

// controllerEndpoint finds the way to the controller and the token it
// checks: --token, else the kubeconfig user's. Without one, tokenErr says
// why; the caller decides whether to go anyway.
func (c *cli) controllerEndpoint(o controllerOptions) (*endpoint, error) {
	direct, err := o.check()
	if err != nil {
		return nil, err
	}
	o = o.forStack(nil) // the main controller's, unless a caller chose
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	var e *endpoint
	if direct != nil {
		e, err = directEndpoint(direct, o)
	} else {
		e, err = proxyEndpoint(cfg, o)
	}
	if err != nil {
		return nil, err
	}
	if e.token = o.token; e.token == "" {
		e.token, e.tokenErr = bearerToken(cfg)
	}
	return e, nil
}

// directEndpoint is the listener at u, its certificate checked against
// --controller-ca-file (else the system's roots), or not at all.
func directEndpoint(u *url.URL, o controllerOptions) (*endpoint, error) {
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
	return &endpoint{base: u, client: &http.Client{Transport: tr}, via: "the controller at " + u.Redacted()}, nil
}

// proxyEndpoint is the listener through the API server's service proxy,
// reached as the kubeconfig says.
func proxyEndpoint(cfg *rest.Config, o controllerOptions) (*endpoint, error) {
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// No client timeout: `logs --follow` reads as long as the operation
	// runs; Ctrl-C ends it. A plan's read has its own deadline.
	return &endpoint{
		base:    wire.ProxyURL(host, o.namespace, o.service),
		client:  hc,
		via:     fmt.Sprintf("service %s/%s (port %s) through the API server", o.namespace, o.service, wire.PortName),
		proxied: true,
	}, nil
}

// get sends GET u, accepting accept ("" for any), with the token if there
// is one. An error reaching the controller names the way in.
func (e *endpoint) get(ctx context.Context, u *url.URL, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if e.token != "" {
		req.Header.Set(wire.TokenHeader, e.token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching %s: %w", e.via, unwrapURLError(err))
	}
	return resp, nil
}

// refusal explains an answer other than 200: the controller's own (a
// wire error body: no such thing, a token it did not accept, no get on the
// Stack), or the API server's on the way to it. reading says what was
// refused ("the logs"); notFound makes the error of the controller's 404.
func (e *endpoint) refusal(code int, body []byte, reading, ns, name string, notFound func(msg string) error) error {
	if msg, ok := wire.ReadError(body); ok {
		switch code {
		case http.StatusNotFound:
			return notFound(msg)
		case http.StatusForbidden:
			return fmt.Errorf("not allowed to read %s of Stack %s/%s: %s; ask for get on stacks.stackpilot.dev in namespace %s", reading, ns, name, msg, ns)
		case http.StatusUnauthorized:
			why := "pass a valid one with --token (e.g. from `kubectl create token`)"
			if e.tokenErr != nil {
				why = e.tokenErr.Error()
			}
			return fmt.Errorf("the controller did not accept your token: %s; %s", msg, why)
		}
		return fmt.Errorf("%s answered %d %s: %s", e.via, code, http.StatusText(code), msg)
	}
	if e.proxied {
		if err := proxyStatusError(e.via, "is the controller running, with --logs-bind-address?", code, body); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s answered %d %s: %s", e.via, code, http.StatusText(code), shortBody(body))
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
