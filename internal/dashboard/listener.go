package dashboard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Setup serves the dashboard on addr over HTTPS with cert, on every replica
// (each reads its own cache), unless addr is "0" or empty.
func Setup(mgr ctrl.Manager, addr string, cert tls.Certificate) error {
	if addr == "0" || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--dashboard-bind-address: %w", err)
	}
	s := NewServer(mgr.GetClient(), mgr.GetClient())
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return mgr.Add(&listener{srv: srv, ln: ln})
}

type listener struct {
	srv *http.Server
	ln  net.Listener
}

func (l *listener) NeedLeaderElection() bool { return false }

func (l *listener) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.srv.Shutdown(shut)
	}()
	ctrl.Log.WithName("dashboard").Info("serving the dashboard over HTTPS", "address", l.ln.Addr().String())
	if err := l.srv.ServeTLS(l.ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
