package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// upstreamOrigin answers as the dashboard checks a session's change: an
// Origin, when sent, must be "https://" + the Host the request came to.
func upstreamOrigin(w http.ResponseWriter, r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "https://"+r.Host {
		writeProxyError(w, http.StatusForbidden, "origin "+o+" is not https://"+r.Host)
		return false
	}
	return true
}

// serveProxy serves a dashboardProxy to upstream on a loopback port and
// returns that port.
func serveProxy(t *testing.T, upstream *httptest.Server) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	u, _ := url.Parse(upstream.URL)
	srv := &http.Server{Handler: newDashboardProxy(u, upstream.Client().Transport, port, "the test dashboard", io.Discard)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return port
}

// The page's origin is the proxy's; the controller wants its own: a
// request from the page reaches it with that, a change from another
// origin does not reach it at all.
func TestDashboardProxyOrigin(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var seen []string // the Origin of each request that reached the controller
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Origin"))
		mu.Unlock()
		if upstreamOrigin(w, r) {
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer upstream.Close()
	port := serveProxy(t, upstream)
	upHost := strings.TrimPrefix(upstream.URL, "https://")

	send := func(method, host, origin string) int {
		t.Helper()
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d/api/stacks/infra/web/reconcile", port), nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	local := "localhost:" + strconv.Itoa(port)
	for _, origin := range []string{"http://localhost:" + strconv.Itoa(port), "http://127.0.0.1:" + strconv.Itoa(port)} {
		seen = nil
		g.Expect(send(http.MethodPost, local, origin)).To(Equal(http.StatusOK), origin)
		g.Expect(seen).To(Equal([]string{"https://" + upHost}), "the local origin is not rewritten to the controller's")
	}
	for _, origin := range []string{"https://evil.example", "http://localhost:1", "null"} {
		seen = nil
		g.Expect(send(http.MethodPost, local, origin)).To(Equal(http.StatusForbidden), origin)
		g.Expect(seen).To(BeEmpty(), "a change from another origin reached the controller")
	}
	// Without an Origin (an API client), as the controller itself allows.
	seen = nil
	g.Expect(send(http.MethodPost, local, "")).To(Equal(http.StatusOK))
	// A page of a name that resolves to 127.0.0.1 (DNS rebinding): refused.
	seen = nil
	g.Expect(send(http.MethodGet, "evil.example:"+strconv.Itoa(port), "")).To(Equal(http.StatusForbidden))
	g.Expect(seen).To(BeEmpty())
}

// The event stream and a followed log arrive as the controller writes
// them: the first event is read before its handler returns.
func TestDashboardProxyStreams(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	handlerDone := make(chan struct{})
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		defer close(handlerDone)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: change\ndata: {\"name\":\"web\"}\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "event: resync\ndata: {}\n\n")
	}))
	defer upstream.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // before Close, which waits for the handler
	port := serveProxy(t, upstream)

	// The request and the first line are read aside: a proxy that buffers
	// holds back even the answer's headers.
	type first struct {
		line string
		r    *bufio.Reader
		err  error
	}
	firstc := make(chan first, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://localhost:%d/api/events", port))
		if err != nil {
			firstc <- first{err: err}
			return
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		r := bufio.NewReader(resp.Body)
		line, err := r.ReadString('\n')
		firstc <- first{line, r, err}
	}()
	var got first
	select {
	case got = <-firstc:
		g.Expect(got.err).NotTo(HaveOccurred())
		g.Expect(got.line).To(Equal("event: change\n"))
	case <-handlerDone:
		t.Fatal("the handler returned before its first event came through: the proxy buffers")
	case <-time.After(time.Minute):
		t.Fatal("no event came through in a minute: the proxy buffers")
	}
	select {
	case <-handlerDone:
		t.Fatal("the handler returned before it was released")
	default:
	}
	unblock()
	rest, err := io.ReadAll(got.r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(rest)).To(ContainSubstring("event: resync"))
}

// fakeDashboard answers the sign-in code for token, a session for that
// code (a Secure cookie, as the controller sets it), and the fleet for that
// session only.
func fakeDashboard(t *testing.T, token string) *httptest.Server {
	const code, session = "c0de-one-use", "sess-1"
	return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /api/signin-codes":
			if r.Header.Get("Authorization") != "Bearer "+token {
				writeProxyError(w, http.StatusUnauthorized, "token refused by the API server")
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "user": "alice"})
		case "POST /api/session":
			var in struct{ Code string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			if !upstreamOrigin(w, r) {
				return
			}
			if in.Code != code {
				writeProxyError(w, http.StatusUnauthorized, "unknown code")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "stackpilot_session", Value: session, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
			_ = json.NewEncoder(w).Encode(map[string]string{"user": "alice", "csrf": "x"})
		case "GET /api/fleet":
			if c, err := r.Cookie("stackpilot_session"); err != nil || c.Value != session || len(r.Cookies()) != 1 {
				writeProxyError(w, http.StatusUnauthorized, fmt.Sprintf("not signed in: cookies %q", r.Header.Get("Cookie")))
				return
			}
			_, _ = io.WriteString(w, `{"total":1,"user":"alice"}`)
		default:
			http.NotFound(w, r)
		}
	}))
}

// caFile writes the test server's certificate for --controller-ca-file.
func caFile(t *testing.T, s *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// `stackpilot dashboard --controller-url` asks for a sign-in code with the
// token in Authorization and prints a URL that holds the code, never the
// token; a browser signs in with it through the proxy, keeps the session's
// cookie (Secure as sent, over http://localhost) and reads the fleet.
func TestDashboardSignIn(t *testing.T) {
	g := NewWithT(t)
	const token = "tok-not-for-urls"
	upstream := fakeDashboard(t, token)
	defer upstream.Close()

	var stdout, stderr testenv.SyncBuffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	o := &dashboardOptions{controller: controllerOptions{url: upstream.URL, token: token, caFile: caFile(t, upstream)}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.dashboard(ctx, o) }()
	var link string
	g.Eventually(func() string {
		select {
		case err := <-done:
			t.Fatalf("dashboard ended: %v\n%s", err, stderr.String())
		default:
		}
		link = strings.TrimSpace(stdout.String())
		return link
	}, time.Minute, 10*time.Millisecond).ShouldNot(BeEmpty())

	g.Expect(link).To(MatchRegexp(`^http://(localhost|127\.0\.0\.1):\d+/#code=c0de-one-use$`))
	g.Expect(link + stderr.String()).NotTo(ContainSubstring(token))
	g.Expect(stderr.String()).To(ContainSubstring("signed in as alice"))
	g.Expect(stderr.String()).To(ContainSubstring("once, within a minute"))
	g.Expect(stderr.String()).To(ContainSubstring("sign in on the page with a token"))

	// The page: POST the code from the fragment, then read with the cookie.
	page, err := url.Parse(link)
	g.Expect(err).NotTo(HaveOccurred())
	code := strings.TrimPrefix(page.Fragment, "code=")
	page.Fragment = ""
	jar, err := cookiejar.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	browser := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodPost, page.JoinPath("api", "session").String(), strings.NewReader(`{"code":"`+code+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://"+page.Host)
	resp, err := browser.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	setCookie := resp.Header.Get("Set-Cookie")
	g.Expect(setCookie).To(HavePrefix("stackpilot_session-" + page.Port() + "=sess-1"))
	g.Expect(setCookie).To(ContainSubstring("HttpOnly"))
	g.Expect(setCookie).To(ContainSubstring("SameSite=Strict"))
	g.Expect(setCookie).NotTo(ContainSubstring("Secure"))
	// Another local service's cookie, which the browser sends along to
	// this port: not for the controller.
	jar.SetCookies(page, []*http.Cookie{{Name: "other_app", Value: "private"}})
	resp, err = browser.Get(page.JoinPath("api", "fleet").String())
	g.Expect(err).NotTo(HaveOccurred())
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	g.Expect(string(body)).To(ContainSubstring(`"user":"alice"`))

	cancel()
	g.Eventually(done, time.Minute).Should(Receive(BeNil()))
}

// A token the controller refuses is said, with the fix, and nothing is
// printed on stdout.
func TestDashboardTokenRefused(t *testing.T) {
	g := NewWithT(t)
	upstream := fakeDashboard(t, "the-right-one")
	defer upstream.Close()
	var stdout, stderr testenv.SyncBuffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	o := &dashboardOptions{controller: controllerOptions{url: upstream.URL, token: "wrong", caFile: caFile(t, upstream)}}
	err := c.dashboard(context.Background(), o)
	g.Expect(err).To(MatchError(And(ContainSubstring("the controller did not accept your token: token refused by the API server"), ContainSubstring("--token"))))
	g.Expect(stdout.String()).To(BeEmpty())

	// Not the dashboard's address (the logs listener, say).
	other := httptest.NewTLSServer(http.NotFoundHandler())
	defer other.Close()
	o = &dashboardOptions{controller: controllerOptions{url: other.URL, token: "t", caFile: caFile(t, other)}}
	g.Expect(c.dashboard(context.Background(), o)).To(MatchError(ContainSubstring("is it the dashboard (--dashboard-bind-address")))
}

func TestDashboardUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dashboard", "--port", "70000"}, "--port 70000: want 0 (any free port) to 65535"},
		{[]string{"dashboard", "--controller-url", "http://x:9445", "--token", "t"}, "the dashboard is served over HTTPS only"},
		{[]string{"dashboard", "extra"}, "dashboard takes no arguments"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("stackpilot %q: exit %d, %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The port-forward goes to the oldest Ready Pod, to its port named
// dashboard; what is missing is said with the fix.
func TestDashboardTarget(t *testing.T) {
	g := NewWithT(t)
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(int64(s), 0)) }
	pod := func(name string, created int, ready bool, ports ...corev1.ContainerPort) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)}}
		p.Spec.Containers = []corev1.Container{{Name: "manager", Ports: ports}}
		p.Status.Phase = corev1.PodRunning
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	dash := corev1.ContainerPort{Name: "dashboard", ContainerPort: 9445}
	pods := []corev1.Pod{pod("new", 20, true, dash), pod("old-not-ready", 5, false, dash), pod("old", 10, true, dash)}
	g.Expect(readyPod(pods).Name).To(Equal("old"))
	g.Expect(containerPort(readyPod(pods), "dashboard")).To(BeEquivalentTo(9445))
	g.Expect(containerPort(&pods[0], "logs")).To(BeZero())
	g.Expect(readyPod(pods[1:2])).To(BeNil())
	g.Expect(podStates(pods[1:2])).To(Equal("old-not-ready Running, not Ready"))

	g.Expect(portForwardRefusal("stackpilot-system", "old", http.StatusForbidden,
		[]byte(`{"kind":"Status","message":"pods \"old\" is forbidden: User \"bob\" cannot create resource \"pods/portforward\""}`))).To(MatchError(
		`not allowed to port-forward to the controller's Pod stackpilot-system/old: pods "old" is forbidden: User "bob" cannot create resource "pods/portforward"; ask for create on pods/portforward in namespace stackpilot-system, or pass --controller-url`))
}
