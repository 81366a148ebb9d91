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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--logs-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(wire.LogsPath, &LogsHandler{Store: logs, Reader: mgr.GetAPIReader(), Client: mgr.GetClient()})
	mux.Handle(wire.PlansPath, &PlanHandler{Store: plans, Reviews: reviews, Reader: mgr.GetClient(), Client: mgr.GetClient()})
	srv := &http.Server{
		Handler:   mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		// No WriteTimeout: a followed log streams as long as its operation runs.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return mgr.Add(&listener{srv: srv, ln: ln})
}

// listener runs on every replica, leader or not: each serves the logs of
// the operations it ran.
type listener struct {
	srv *http.Server
	ln  net.Listener
}

func (s *listener) NeedLeaderElection() bool { return false }

func (s *listener) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(shut)
	}()
	ctrl.Log.WithName("logs").Info("serving engine logs over HTTPS", "address", s.ln.Addr().String())
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
