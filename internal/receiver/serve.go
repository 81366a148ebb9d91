package receiver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Listener serves h on addr as a manager Runnable: it listens when the
// manager starts (after leader election, where the Receiver index is
// filled) and shuts down gracefully when it stops.
type Listener struct {
	Addr    string
	Handler http.Handler
}

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
