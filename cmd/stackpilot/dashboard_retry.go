package main

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// retryTransport sends a request that changes nothing (GET, HEAD, OPTIONS
// without a body) again when the way to the controller fails before an
// answer: a port-forward stream refused while the API server is busy, a TLS
// handshake past its timeout on a loaded machine. The page loads five
// scripts and several API reads through this proxy; one 502 among them
// left it without the script of a page, broken until reloaded. Answers,
// whatever their status, are never retried, nor is anything that could
// change something twice.
type retryTransport struct {
	base     http.RoundTripper
	attempts int           // at least 1
	backoff  time.Duration // before the second attempt; doubled after each
	log      io.Writer
}

func (t *retryTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	wait := t.backoff
	for attempt := 1; ; attempt++ {
		resp, err := t.base.RoundTrip(r)
		if err == nil || attempt >= t.attempts || !safeMethod(r.Method) || (r.Body != nil && r.Body != http.NoBody) {
			return resp, err
		}
		fmt.Fprintf(t.log, "%s %s: %v; trying again in %s\n", r.Method, r.URL.Path, unwrapURLError(err), wait)
		select {
		case <-r.Context().Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}
