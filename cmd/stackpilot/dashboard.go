package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/stackpilot/stackpilot/internal/wire"
)

// dashboardOptions are the flags of `stackpilot dashboard`.
type dashboardOptions struct {
	port       int
	open       bool
	controller controllerOptions
}

func (c *cli) newDashboardCmd() *cobra.Command {
	o := &dashboardOptions{}
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Open the controller's web dashboard on a local port, signed in as you",
		Long: `Serves the controller's web dashboard on http://localhost:PORT (loopback
only) until Ctrl-C, and prints a link that signs a browser in as the
kubeconfig user (or --token): the link holds a sign-in code, not the token,
which works once, within a minute. After that, the page's own sign-in form
takes a token (` + "`kubectl create token NAME -n NAMESPACE`" + `).

The dashboard is the controller's HTTPS listener --dashboard-bind-address
(port dashboard, 9445, of the controller's Pods in config/manager and the
chart). The CLI reaches it through a port-forward to a Ready Pod of the
controller's Service (stackpilot-controller in stackpilot-system), which
needs get on services, list on pods and create on pods/portforward in that
namespace; or straight at --controller-url (an Ingress, a LoadBalancer).
What the page shows and allows is decided by the token's own rights: a
Stack is listed to whoever may get it, a button works for whoever may
patch it.`,
		Example: `  stackpilot dashboard
  stackpilot dashboard --port 8080 --open
  stackpilot dashboard --controller-url https://stackpilot.example.com --token "$(kubectl create token viewer -n infra)"`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext()
			defer stop()
			return c.dashboard(ctx, o)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&o.port, "port", 0, "The local port to serve the dashboard on, on 127.0.0.1 and ::1 (0: any free port).")
	fs.BoolVar(&o.open, "open", false, "Also open the link in a browser (with xdg-open on Linux, open on macOS).")
	o.controller.addDashboardFlags(fs)
	return cmd
}

// dashboardUpstream is the way to the dashboard's listener.
type dashboardUpstream struct {
	base  *url.URL // the listener's root; its Host is what the controller sees
	tr    http.RoundTripper
	via   string // names the way in, for messages
	token string
	close func()
}

func (c *cli) dashboard(ctx context.Context, o *dashboardOptions) error {
	if o.port < 0 || o.port > 65535 {
		return usageErrorf("--port %d: want 0 (any free port) to 65535", o.port)
	}
	up, err := c.dashboardUpstream(ctx, o.controller)
	if err != nil {
		return err
	}
	defer up.close()
	ln, host, err := listenLoopback(o.port)
	if err != nil {
		return err
	}
	port := ln.port()
	srv := &http.Server{
		Handler:           newDashboardProxy(up.base, up.tr, port, up.via, c.stderr),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, len(ln.ls))
	for _, l := range ln.ls {
		go func() { served <- srv.Serve(l) }()
	}
	defer func() { _ = srv.Close() }()

	code, user, err := signInCode(ctx, up)
	if err != nil {
		return err
	}
	page := fmt.Sprintf("http://%s:%d/", host, port)
	fmt.Fprintf(c.stderr, "Serving the dashboard of %s on %s, signed in as %s. Open this link (it signs a browser in once, within a minute):\n", up.via, page, user)
	fmt.Fprintf(c.stdout, "%s#code=%s\n", page, url.QueryEscape(code))
	fmt.Fprintf(c.stderr, "After that, open %s and sign in on the page with a token (`kubectl create token NAME -n NAMESPACE`), or run `stackpilot dashboard` again. Ctrl-C stops it.\n", page)
	if o.open {
		if err := openBrowser(page + "#code=" + url.QueryEscape(code)); err != nil {
			fmt.Fprintf(c.stderr, "Could not open a browser (%v): open the link yourself.\n", err)
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", page, err)
	}
}

// addDashboardFlags registers the options as the dashboard reads them: a
// port-forward by default, not the service proxy (it rewrites links in
// HTML and strips Authorization).
func (o *controllerOptions) addDashboardFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.url, "controller-url", "", "Reach the dashboard at this URL (https://host:port of the controller's --dashboard-bind-address, e.g. an Ingress) instead of through a port-forward.")
	fs.StringVar(&o.namespace, "controller-namespace", defaultControllerNamespace, "Namespace of the controller's Service (for the port-forward).")
	fs.StringVar(&o.service, "controller-service", defaultControllerService, "Name of the controller's Service, whose Ready Pods' container port \""+wire.DashboardPortName+"\" the port-forward reaches (a shard's: "+defaultControllerService+"-<shard>).")
	fs.StringVar(&o.token, "token", "", "Bearer token to sign in with (default: the kubeconfig user's).")
	fs.StringVar(&o.caFile, "controller-ca-file", "", "With --controller-url: the CA certificate (PEM) the dashboard's certificate is checked against (default: the system's).")
	fs.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "With --controller-url: do not check the dashboard's certificate.")
}

// dashboardUpstream is --controller-url, else a port-forward to the
// controller's Pod, with the token to sign in with.
func (c *cli) dashboardUpstream(ctx context.Context, o controllerOptions) (*dashboardUpstream, error) {
	direct, err := o.check()
	if err != nil {
		return nil, err
	}
	if direct != nil && direct.Scheme != "https" {
		return nil, usageErrorf("--controller-url %q: the dashboard is served over HTTPS only: want https://host:port", o.url)
	}
	if direct == nil && o.service == "" {
		return nil, usageErrorf("--controller-service must not be empty")
	}
	if direct != nil && o.token != "" {
		// Nothing to ask the cluster: no kubeconfig needed.
		return directDashboard(direct, o)
	}
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	token := o.token
	if token == "" {
		if token, err = bearerToken(cfg); err != nil {
			return nil, err
		}
	}
	var up *dashboardUpstream
	if direct != nil {
		up, err = directDashboard(direct, o)
	} else {
		up, err = c.forwardedDashboard(ctx, cfg, o)
	}
	if err != nil {
		return nil, err
	}
	up.token = token
	return up, nil
}

// directDashboard is the listener at u, checked as endpoint.go checks the
// logs listener's certificate.
func directDashboard(u *url.URL, o controllerOptions) (*dashboardUpstream, error) {
	e, err := directEndpoint(u, o)
	if err != nil {
		return nil, err
	}
	base := *u
	base.Path, base.RawQuery, base.Fragment = strings.TrimSuffix(base.Path, "/"), "", ""
	return &dashboardUpstream{base: &base, tr: e.client.Transport, via: "the dashboard at " + u.Redacted(), token: o.token, close: func() {}}, nil
}

// forwardedDashboard is the listener in a Ready Pod of the controller's
// Service, through a port-forward. The Pod is found now, so that what is
// missing is said before anything is served.
func (c *cli) forwardedDashboard(ctx context.Context, cfg *rest.Config, o controllerOptions) (*dashboardUpstream, error) {
	kube, err := c.kube.Client()
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &podForwarder{cfg: cfg, kube: kube, namespace: o.namespace, service: o.service, log: c.stderr, ctx: fctx}
	_, port, err := f.dashboardTarget(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the dial goes to the port-forward, never to an HTTP proxy
	tr.DialContext = f.DialContext
	// The controller's certificate is self-signed unless --logs-cert-dir
	// gave it one, and nothing here could check it. Not checking it is
	// sound on this way in: the stream is the API server's tunnel,
	// authenticated with the kubeconfig's credentials, to the port of
	// exactly the Pod named, so no one else can answer at its end.
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the port-forward is the authenticated channel
	// The Host the controller sees, and so the origin it expects: the
	// Service's name, which its certificate names.
	base := &url.URL{Scheme: "https", Host: net.JoinHostPort(o.service+"."+o.namespace+".svc", strconv.Itoa(int(port)))}
	return &dashboardUpstream{base: base, tr: tr, via: f.via(), close: func() {
		f.close()
		cancel()
	}}, nil
}

// signInCode trades the token for a one-use sign-in code (POST
// /api/signin-codes, the token in Authorization): the code goes in the
// printed URL, the token never does. It returns the user the controller
// knows the token as.
func signInCode(ctx context.Context, up *dashboardUpstream) (code, user string, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, up.base.JoinPath("api", "signin-codes").String(), nil)
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+up.token)
	resp, err := (&http.Client{Transport: up.tr}).Do(req)
	if err != nil {
		return "", "", fmt.Errorf("reaching %s: %w", up.via, unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var answer struct {
		Code  string `json:"code"`
		User  string `json:"user"`
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &answer)
	msg := answer.Error
	if msg == "" {
		msg = shortBody(body)
	}
	switch {
	case resp.StatusCode == http.StatusOK && answer.Code != "":
		return answer.Code, answer.User, nil
	case resp.StatusCode == http.StatusUnauthorized:
		return "", "", fmt.Errorf("the controller did not accept your token: %s; pass a valid one with --token (e.g. from `kubectl create token`)", msg)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return "", "", fmt.Errorf("%s answered %d to POST /api/signin-codes: is it the dashboard (--dashboard-bind-address, port %s), not another of the controller's listeners?", up.via, resp.StatusCode, wire.DashboardPortName)
	}
	return "", "", fmt.Errorf("%s answered %d %s to a sign-in code request: %s", up.via, resp.StatusCode, http.StatusText(resp.StatusCode), msg)
}

// loopback is the proxy's listeners: 127.0.0.1, and ::1 at the same port
// where the machine has it.
type loopback struct{ ls []net.Listener }

func (l loopback) port() int { return l.ls[0].Addr().(*net.TCPAddr).Port }

// listenLoopback listens on 127.0.0.1:port, and on [::1] at the port that
// got, and returns the host name for the URL: localhost, which browsers
// treat as a secure context, unless another program holds the port on ::1
// (a browser may try ::1 first for localhost): 127.0.0.1 then.
func listenLoopback(port int) (loopback, string, error) {
	l4, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return loopback{}, "", fmt.Errorf("port %d on 127.0.0.1 is in use: choose another with --port (0: any free port)", port)
		}
		return loopback{}, "", fmt.Errorf("listening on 127.0.0.1: %w", err)
	}
	ln := loopback{ls: []net.Listener{l4}}
	l6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(ln.port())))
	switch {
	case err == nil:
		ln.ls = append(ln.ls, l6)
	case errors.Is(err, syscall.EADDRINUSE):
		return ln, "127.0.0.1", nil
	}
	return ln, "localhost", nil
}

// openBrowser opens u with the desktop's opener.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
