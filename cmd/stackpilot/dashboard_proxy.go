package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// dashboardProxy serves the dashboard on a loopback port, in plain HTTP,
// passing every request to the controller's HTTPS listener (upstream) and
// adapting what a browser's session needs:
//
//   - Origin: the controller accepts a session's change only from its own
//     origin, "https://" + the Host it was sent to. The page's origin here
//     is http://localhost:PORT, so a request from it gets the upstream's
//     origin instead; a change from any other origin is refused here.
//   - Cookies: the controller's session cookie is Secure. Chrome, Firefox
//     and Go's cookie jar keep a Secure cookie from http://localhost, but
//     Safari drops it (WebKit bug 281149), so Secure is removed on the way
//     back: the hop it travels in clear is this machine's loopback only,
//     which is what the browsers' exception for localhost rests on too.
//     Cookies are not
//     scoped by port, so each is renamed with this proxy's port, and only
//     those go upstream: two `stackpilot dashboard` of two clusters do not
//     overwrite each other's session, nor see it.
//   - Host: only localhost, 127.0.0.1 and [::1] at this port are answered,
//     so that a web site whose name resolves to 127.0.0.1 (DNS rebinding)
//     cannot talk to it as its own origin.
//
// Answers are not buffered: the page's live updates (/api/events) and a
// followed log are streams.
type dashboardProxy struct {
	port     string   // this proxy's port
	upstream *url.URL // the listener's root; its Host is what the controller sees
	rp       *httputil.ReverseProxy
}

// newDashboardProxy proxies to upstream through tr; via names the way in
// for the error a browser shows when upstream cannot be reached, also
// written to log.
func newDashboardProxy(upstream *url.URL, tr http.RoundTripper, port int, via string, log io.Writer) *dashboardProxy {
	p := &dashboardProxy{port: strconv.Itoa(port), upstream: upstream}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      &retryTransport{base: tr, attempts: 4, backoff: 250 * time.Millisecond, log: log},
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the browser went away
			}
			msg := fmt.Sprintf("reaching %s: %v", via, unwrapURLError(err))
			fmt.Fprintf(log, "%s %s: %s\n", r.Method, r.URL.Path, msg)
			writeProxyError(w, http.StatusBadGateway, msg)
		},
	}
	return p
}

func (p *dashboardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.localHost(r.Host) {
		writeProxyError(w, http.StatusForbidden, "this proxy answers only http://localhost:"+p.port+"/ and http://127.0.0.1:"+p.port+"/")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !p.localOrigin(origin) && !safeMethod(r.Method) {
		writeProxyError(w, http.StatusForbidden, "refused: a change must come from the dashboard's own page (origin "+origin+" is not http://localhost:"+p.port+")")
		return
	}
	p.rp.ServeHTTP(w, r)
}

func (p *dashboardProxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.upstream)
	if p.localOrigin(pr.In.Header.Get("Origin")) {
		pr.Out.Header.Set("Origin", "https://"+p.upstream.Host)
	}
	pr.Out.Header.Del("Cookie")
	suffix := p.cookieSuffix()
	for _, c := range pr.In.Cookies() {
		if name, ok := strings.CutSuffix(c.Name, suffix); ok && name != "" {
			pr.Out.AddCookie(&http.Cookie{Name: name, Value: c.Value})
		}
	}
}

// modifyResponse renames the cookies the controller sets and drops
// Secure (see dashboardProxy).
func (p *dashboardProxy) modifyResponse(resp *http.Response) error {
	lines := resp.Header.Values("Set-Cookie")
	if len(lines) == 0 {
		return nil
	}
	resp.Header.Del("Set-Cookie")
	for _, line := range lines {
		c, err := http.ParseSetCookie(line)
		if err != nil {
			continue
		}
		c.Name += p.cookieSuffix()
		c.Secure = false
		resp.Header.Add("Set-Cookie", c.String())
	}
	return nil
}

// cookieSuffix makes a cookie this proxy's.
func (p *dashboardProxy) cookieSuffix() string { return "-" + p.port }

// localHost: the Host of a request a browser sent to this proxy.
func (p *dashboardProxy) localHost(host string) bool {
	switch host {
	case "localhost:" + p.port, "127.0.0.1:" + p.port, "[::1]:" + p.port:
		return true
	}
	return false
}

// localOrigin: the origin of this proxy's page.
func (p *dashboardProxy) localOrigin(origin string) bool {
	h, ok := strings.CutPrefix(origin, "http://")
	return ok && p.localHost(h)
}

// safeMethod: a request that changes nothing (the controller checks no
// origin on those either).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// writeProxyError answers as the dashboard does, {"error": msg}, so that
// the page shows msg.
func writeProxyError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
