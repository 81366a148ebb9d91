package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// sinkRequest is one request an alert sink received.
type sinkRequest struct {
	Path   string
	Header http.Header
	Body   []byte
	At     time.Time
}

// alertSink is an HTTP endpoint on loopback that records what Alerts send.
// hang makes it answer nothing until the test ends.
type alertSink struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []sinkRequest
	hang     chan struct{}
}

func newAlertSink(t *testing.T, hang bool) *alertSink {
	t.Helper()
	s := &alertSink{}
	if hang {
		s.hang = make(chan struct{})
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		s.requests = append(s.requests, sinkRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now()})
		s.mu.Unlock()
		if s.hang != nil {
			select {
			case <-s.hang:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(func() {
		if s.hang != nil {
			close(s.hang)
		}
		s.srv.Close()
	})
	return s
}

func (s *alertSink) URL() string { return s.srv.URL }

// Requests returns a copy of what was received so far.
func (s *alertSink) Requests() []sinkRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkRequest(nil), s.requests...)
}
