package receiver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Listener serves h on addr as a manager Runnable: it listens when the
// manager starts and shuts down gracefully when it stops.
type Listener struct {
	Addr    string
	Handler http.Handler
}

// NeedLeaderElection is false: every replica serves the webhooks, so that a
// push reaches a Stack through a failover and whichever Pod a Service picks.
// A push only sets a Stack's reconcile-request annotation in the API server,
// which the leader acts on; the Receiver index it reads is filled on every
// replica too (the Receiver reconciler needs no leader either).
func (l *Listener) NeedLeaderElection() bool { return false }

// Start listens on Addr until ctx ends.
func (l *Listener) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/hook/", l.Handler)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return nil
	}
}
