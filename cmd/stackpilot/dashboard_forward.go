package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/wire"
)

// The port-forward of `stackpilot dashboard`: what `kubectl port-forward`
// does, without a listener of its own. Each connection the local proxy's
// HTTP transport opens becomes a pair of streams (data and error) over one
// SPDY connection that the API server tunnels, through the kubelet, to the
// dashboard port inside one Ready Pod of the controller's Service. Not the
// API server's service proxy: it rewrites links in HTML and strips
// Authorization, and the page needs neither.

// portForwardProtocol is the port-forward subprotocol the kubelet speaks
// (client-go's portforward.PortForwardProtocolV1Name, without linking the
// package for one constant).
const portForwardProtocol = "portforward.k8s.io"

// podForwarder dials the dashboard port of a Ready Pod behind the
// controller's Service. When its SPDY connection ends (the Pod went away, a
// rollout, an idle timeout) the next dial finds a Ready Pod again.
type podForwarder struct {
	cfg                *rest.Config
	kube               client.Reader
	namespace, service string
	// log tells the user when the forward moves to another Pod.
	log io.Writer
	// ctx outlives the requests: the SPDY connection is shared by them.
	ctx context.Context

	mu        sync.Mutex
	conn      httpstream.Connection
	pod       string
	port      int32
	requestID int
}

// via names the way in, for messages.
func (f *podForwarder) via() string {
	return fmt.Sprintf("service %s/%s (port %s) through a port-forward", f.namespace, f.service, wire.DashboardPortName)
}

// dashboardTarget is the Ready Pod behind the Service and its container
// port named dashboard, or an error that says what to fix.
func (f *podForwarder) dashboardTarget(ctx context.Context) (*corev1.Pod, int32, error) {
	svc := &corev1.Service{}
	if err := f.kube.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: f.service}, svc); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, 0, fmt.Errorf("no Service %s/%s: is Stackpilot installed there? (else pass --controller-namespace and --controller-service, or --controller-url)", f.namespace, f.service)
		case apierrors.IsForbidden(err):
			return nil, 0, fmt.Errorf("not allowed to read Service %s/%s: %s; the port-forward needs get on services, list on pods and create on pods/portforward in namespace %s (or pass --controller-url)", f.namespace, f.service, apiMessage(err), f.namespace)
		}
		return nil, 0, fmt.Errorf("reading Service %s/%s: %w", f.namespace, f.service, err)
	}
	if len(svc.Spec.Selector) == 0 {
		return nil, 0, fmt.Errorf("the Service %s/%s selects no Pods (it has no selector): pass --controller-service, or --controller-url", f.namespace, f.service)
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector).String()
	pods := &corev1.PodList{}
	if err := f.kube.List(ctx, pods, client.InNamespace(f.namespace), client.MatchingLabels(svc.Spec.Selector)); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, 0, fmt.Errorf("not allowed to list the Pods of Service %s/%s: %s; the port-forward needs list on pods and create on pods/portforward in namespace %s (or pass --controller-url)", f.namespace, f.service, apiMessage(err), f.namespace)
		}
		return nil, 0, fmt.Errorf("listing the Pods of Service %s/%s: %w", f.namespace, f.service, err)
	}
	pod := readyPod(pods.Items)
	if pod == nil {
		return nil, 0, fmt.Errorf("no Ready Pod behind Service %s/%s (%s): is the controller running? `kubectl -n %s get pods -l %s`",
			f.namespace, f.service, podStates(pods.Items), f.namespace, selector)
	}
	port := containerPort(pod, wire.DashboardPortName)
	if port == 0 {
		return nil, 0, fmt.Errorf("the controller's Pod %s/%s has no container port named %s, so the controller does not serve the dashboard: "+
			"start it with --dashboard-bind-address=:9445 and a containerPort 9445 named %s (config/manager does; the chart: dashboard.enabled=true)",
			f.namespace, pod.Name, wire.DashboardPortName, wire.DashboardPortName)
	}
	return pod, port, nil
}

// readyPod is the oldest Pod that is Ready and not going away (the longest
// running replica: the least likely to go next), or nil.
func readyPod(pods []corev1.Pod) *corev1.Pod {
	var ready []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return nil
	}
	sort.Slice(ready, func(i, j int) bool {
		a, b := ready[i].CreationTimestamp, ready[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return ready[i].Name < ready[j].Name
	})
	return ready[0]
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podStates says what each Pod is doing, for "no Ready Pod".
func podStates(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "it selects no Pod"
	}
	var s []string
	for i := range pods {
		p := &pods[i]
		state := string(p.Status.Phase)
		switch {
		case p.DeletionTimestamp != nil:
			state = "terminating"
		case p.Status.Phase == corev1.PodRunning:
			state = "Running, not Ready"
		}
		s = append(s, p.Name+" "+state)
	}
	return strings.Join(s, ", ")
}

// containerPort is the number of the TCP container port named name, or 0.
func containerPort(p *corev1.Pod, name string) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == name && (port.Protocol == "" || port.Protocol == corev1.ProtocolTCP) {
				return port.ContainerPort
			}
		}
	}
	return 0
}

// apiMessage is the API server's message of err, without client-go's
// prefixes.
func apiMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

// connect is the SPDY connection to the dashboard's Pod, dialled anew when
// there is none or it ended.
func (f *podForwarder) connect() (httpstream.Connection, int32, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		select {
		case <-f.conn.CloseChan():
			fmt.Fprintf(f.log, "The port-forward to Pod %s/%s ended; finding a Ready Pod again (a session lives in one Pod's memory: sign in again if the page asks).\n", f.namespace, f.pod)
			f.conn = nil
		default:
		}
	}
	if f.conn == nil {
		pod, port, err := f.dashboardTarget(f.ctx)
		if err != nil {
			return nil, 0, 0, err
		}
		conn, err := f.dial(pod.Name)
		if err != nil {
			return nil, 0, 0, err
		}
		f.conn, f.pod, f.port = conn, pod.Name, port
	}
	f.requestID++
	return f.conn, f.port, f.requestID, nil
}

// dial opens the SPDY connection of the Pod's portforward subresource.
// The upgrade is sent here rather than by client-go's spdy.Negotiate, which
// hides the status code: a 403 must say which right to ask for. The round
// tripper is client-go's spdy.RoundTripperFor's, without the deprecated
// k8s.io/apimachinery/pkg/util/httpstream types it returns.
func (f *podForwarder) dial(pod string) (httpstream.Connection, error) {
	tlsConfig, err := rest.TLSConfigFor(f.cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	proxy := http.ProxyFromEnvironment
	if f.cfg.Proxy != nil {
		proxy = f.cfg.Proxy
	}
	upgrader, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{TLS: tlsConfig, Proxier: proxy, PingPeriod: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	// The kubeconfig's credentials (token, exec plugin, impersonation).
	rt, err := rest.HTTPWrappersForConfig(f.cfg, upgrader)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	host, _, err := rest.DefaultServerUrlFor(f.cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	u := host.JoinPath("api/v1/namespaces", f.namespace, "pods", pod, "portforward")
	req, err := http.NewRequestWithContext(f.ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Add(httpstream.HeaderProtocolVersion, portForwardProtocol)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("port-forward to Pod %s/%s: %w", f.namespace, pod, unwrapURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, portForwardRefusal(f.namespace, pod, resp.StatusCode, body)
	}
	conn, err := upgrader.NewConnection(resp)
	if err != nil {
		return nil, fmt.Errorf("port-forward to Pod %s/%s: %w", f.namespace, pod, err)
	}
	return conn, nil
}

// portForwardRefusal explains the API server's answer other than 101 to a
// port-forward, with its fix.
func portForwardRefusal(namespace, pod string, code int, body []byte) error {
	msg := shortBody(body)
	var status struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &status) == nil && status.Message != "" {
		msg = status.Message
	}
	switch code {
	case http.StatusForbidden:
		return fmt.Errorf("not allowed to port-forward to the controller's Pod %s/%s: %s; ask for create on pods/portforward in namespace %s, or pass --controller-url", namespace, pod, msg, namespace)
	case http.StatusUnauthorized:
		return fmt.Errorf("the API server did not accept the kubeconfig's credentials: %s", msg)
	case http.StatusNotFound:
		return fmt.Errorf("the Pod %s/%s went away before the port-forward: %s; run it again", namespace, pod, msg)
	}
	return fmt.Errorf("port-forward to Pod %s/%s: the API server answered %d %s: %s", namespace, pod, code, http.StatusText(code), msg)
}

// DialContext is the local proxy's transport's dial: a new stream pair to
// the dashboard port, whatever network and address the transport asks for.
func (f *podForwarder) DialContext(_ context.Context, _, _ string) (net.Conn, error) {
	conn, port, id, err := f.connect()
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errStream, err := conn.CreateStream(headers)
	if err != nil {
		return nil, fmt.Errorf("port-forward to Pod %s/%s: %w", f.namespace, f.pod, err)
	}
	// Nothing is written to the error stream: the kubelet writes why the
	// forward failed (nothing listening on the port) and closes it.
	_ = errStream.Close()
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case err != nil:
			remoteErr <- fmt.Errorf("port-forward to Pod %s/%s: %w", f.namespace, f.pod, err)
		case len(msg) > 0:
			remoteErr <- fmt.Errorf("port-forward to Pod %s/%s port %d: %s (is the controller serving the dashboard there, --dashboard-bind-address?)", f.namespace, f.pod, port, msg)
		}
		close(remoteErr)
	}()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		conn.RemoveStreams(errStream)
		return nil, fmt.Errorf("port-forward to Pod %s/%s: %w", f.namespace, f.pod, err)
	}
	return &streamConn{conn: conn, data: data, errStream: errStream, remoteErr: remoteErr,
		addr: forwardAddr(fmt.Sprintf("%s/%s:%d", f.namespace, f.pod, port))}, nil
}

// close ends the SPDY connection.
func (f *podForwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
}

// streamConn is one forwarded connection as a net.Conn for the HTTP
// transport. Deadlines are not supported (nothing here sets any: the
// transport times out by closing).
type streamConn struct {
	conn            httpstream.Connection
	data, errStream httpstream.Stream
	remoteErr       <-chan error
	addr            forwardAddr
	closeOnce       sync.Once
}

// remoteErrWait bounds how long a read that met the end of the data stream
// waits for the kubelet's reason on the error stream.
const remoteErrWait = time.Second

// Read returns the kubelet's reason, when it gave one, rather than a bare
// EOF: "connection refused" says the dashboard is not listening.
func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err == io.EOF {
		select {
		case e := <-c.remoteErr:
			if e != nil {
				return n, e
			}
		case <-time.After(remoteErrWait):
		}
	}
	return n, err
}

func (c *streamConn) Write(p []byte) (int, error) { return c.data.Write(p) }

// Close resets the data stream: the transport is done with both directions.
func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.data.Reset()
		c.conn.RemoveStreams(c.data, c.errStream)
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr              { return c.addr }
func (c *streamConn) RemoteAddr() net.Addr             { return c.addr }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// forwardAddr names the far end of a forwarded connection.
type forwardAddr string

func (a forwardAddr) Network() string { return "portforward" }
func (a forwardAddr) String() string  { return string(a) }
