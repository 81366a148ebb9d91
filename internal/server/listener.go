package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackpilot/stackpilot/internal/logstore"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/wire"
)

// Setup serves the engine logs and the full plans over HTTPS on addr
// ("0" disables it), each only to a caller who may get the Stack,
// with the certificate in certDir (tls.crt, tls.key) or, when certDir is
// empty, a self-signed one made now: the API server's service proxy, the
// way users reach it, does not verify a Service's certificate, and the
// bearer tokens it carries must still not cross the network in the clear.
// The port is bound here, so a taken one fails the start, not later.
func Setup(mgr ctrl.Manager, addr, certDir string, logs *logstore.Store, plans, reviews *plan.Store) error {
	if addr == "0" || addr == "" {
		return nil
	}
	cert, err := Certificate(certDir)
	if err != nil {
		return fmt.Errorf("--logs-cert-dir: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(wire.LogsPath, &LogsHandler{Store: logs, Reader: mgr.GetAPIReader(), Client: mgr.GetClient()})
	mux.Handle(wire.PlansPath, &PlanHandler{Store: plans, Reviews: reviews, Reader: mgr.GetClient(), Client: mgr.GetClient()})
	l, err := NewTLSListener(addr, mux, cert, "logs", "serving engine logs over HTTPS")
	if err != nil {
		return fmt.Errorf("--logs-bind-address: %w", err)
	}
	return mgr.Add(l)
}

// NewTLSListener binds addr now (a taken port fails the start, not later)
// and returns a manager Runnable that serves h over HTTPS with cert on
// every replica, leader or not, until the manager stops. It sets no
// WriteTimeout: a followed log or a stream of events lasts as long as it
// needs.
func NewTLSListener(addr string, h http.Handler, cert tls.Certificate, name, msg string) (*TLSListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return &TLSListener{srv: srv, ln: ln, name: name, msg: msg}, nil
}

// TLSListener is an HTTPS server the manager runs: the logs and plans,
// the dashboard. Every replica serves it (each the logs of the operations
// it ran, the dashboard from its own cache).
type TLSListener struct {
	srv       *http.Server
	ln        net.Listener
	name, msg string
}

func (s *TLSListener) NeedLeaderElection() bool { return false }

func (s *TLSListener) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(shut)
	}()
	ctrl.Log.WithName(s.name).Info(s.msg, "address", s.ln.Addr().String())
	if err := s.srv.ServeTLS(s.ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Certificate is certDir's key pair, else a new self-signed one.
func Certificate(certDir string) (tls.Certificate, error) {
	if certDir != "" {
		return tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _ := os.Hostname()
	names := []string{"stackpilot-controller", "localhost"}
	if host != "" {
		names = append(names, host)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "stackpilot-controller logs"},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
