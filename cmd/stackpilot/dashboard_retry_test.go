package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// flakyTransport fails its first failures calls, then answers status.
type flakyTransport struct {
	failures, calls, status int
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls++
	if f.calls <= f.failures {
		return nil, errors.New("error dialing backend: stream reset")
	}
	return &http.Response{StatusCode: f.status, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// A request that changes nothing is sent again when the way to the
// controller fails, up to the attempts; an answer (a 502 too) and a change
// are never sent twice.
func TestRetryTransport(t *testing.T) {
	req := func(method string, body io.Reader) *http.Request {
		r, err := http.NewRequest(method, "https://stackpilot-controller.stackpilot-system.svc:9445/assets/fleet.js", body)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		name             string
		r                *http.Request
		failures, status int
		wantCalls        int
		wantErr          bool
	}{
		{"a GET the way failed twice", req(http.MethodGet, nil), 2, 200, 3, false},
		{"a GET that never gets through", req(http.MethodGet, nil), 9, 200, 4, true},
		{"a GET answered 502", req(http.MethodGet, nil), 0, 502, 1, false},
		{"a POST", req(http.MethodPost, strings.NewReader("{}")), 2, 200, 1, true},
		{"a POST without a body", req(http.MethodPost, nil), 2, 200, 1, true},
	} {
		base := &flakyTransport{failures: c.failures, status: c.status}
		tr := &retryTransport{base: base, attempts: 4, backoff: time.Millisecond, log: io.Discard}
		resp, err := tr.RoundTrip(c.r)
		if (err != nil) != c.wantErr || base.calls != c.wantCalls {
			t.Errorf("%s: %d calls, error %v; want %d calls, an error: %v", c.name, base.calls, err, c.wantCalls, c.wantErr)
		}
		if err == nil && resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}

	// The browser gone: no more attempts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	base := &flakyTransport{failures: 9, status: 200}
	tr := &retryTransport{base: base, attempts: 4, backoff: time.Hour, log: io.Discard}
	if _, err := tr.RoundTrip(req(http.MethodGet, nil).WithContext(ctx)); err == nil || base.calls != 1 {
		t.Errorf("cancelled: %d calls, error %v; want 1 call and the error", base.calls, err)
	}
}

// The proxy passes a page's script through a way that failed twice: the
// browser gets the script, not a 502.
func TestDashboardProxyRetriesTheWayIn(t *testing.T) {
	up, err := url.Parse("https://stackpilot-controller.stackpilot-system.svc:9445")
	if err != nil {
		t.Fatal(err)
	}
	base := &flakyTransport{failures: 2, status: 200}
	p := newDashboardProxy(up, base, 8000, "the test dashboard", io.Discard)
	p.rp.Transport.(*retryTransport).backoff = time.Millisecond
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://localhost:8000/assets/fleet.js", nil))
	if w.Code != 200 || base.calls != 3 {
		t.Errorf("status %d after %d tries; want 200 after 3", w.Code, base.calls)
	}
}
