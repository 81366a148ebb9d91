package opchannel

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// A Listener is added to the manager, and runs on every replica.
var (
	_ manager.Runnable               = (*Listener)(nil)
	_ manager.LeaderElectionRunnable = (*Listener)(nil)
)

// Listener serves a Handler over HTTPS. It is a controller-runtime Runnable
// that runs on every replica, leader or not: Add it to the manager.
type Listener struct {
	// Handler is what it serves; set it (Server.Handler) before Start.
	Handler http.Handler

	ln   net.Listener
	cert tls.Certificate
}

// Listen binds addr (a taken port fails the start, not later) and prepares
// the certificate: certDir's tls.crt and tls.key when it holds them (the CA
// returned is its ca.crt, else tls.crt), else a self-signed one made now,
// valid for the host of endpoint (an IP or a DNS name, with or without
// https:// and a port) and returned as the CA. A self-signed certificate
// lives as long as the process: the Pods of operations adopted after a
// restart must be given certDir's.
func Listen(addr, endpoint, certDir string) (*Listener, []byte, error) {
	host, err := endpointHost(endpoint)
	if err != nil {
		return nil, nil, err
	}
	cert, caPEM, err := loadCertificate(certDir)
	if errors.Is(err, os.ErrNotExist) {
		cert, caPEM, err = selfSigned(host)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("runner channel certificate: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("runner channel: %w", err)
	}
	return &Listener{ln: ln, cert: cert}, caPEM, nil
}

// Addr is the address it listens on (a port 0 chosen by the kernel, in tests).
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// NeedLeaderElection is false: every replica serves the Pods it started.
func (l *Listener) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (l *Listener) Start(ctx context.Context) error {
	if l.Handler == nil {
		_ = l.ln.Close()
		return errors.New("runner channel: no handler")
	}
	srv := &http.Server{
		Handler:           l.Handler,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{l.cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// Bodies are bounded (handler.go); the artifact may take long to send.
		ReadTimeout:    2 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 16 << 10,
		// TLS handshake errors of probes and scanners are not worth a line.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	ctrl.Log.WithName("runner-channel").Info("serving runner Pods over HTTPS", "address", l.ln.Addr().String())
	if err := srv.ServeTLS(l.ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// endpointHost is the host part of "https://host:port", "host:port" or "host".
func endpointHost(endpoint string) (string, error) {
	hostport := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		hostport = u.Host
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "" {
		return "", fmt.Errorf("runner channel endpoint %q has no host", endpoint)
	}
	return host, nil
}

// loadCertificate reads certDir's key pair; os.ErrNotExist when there is none.
func loadCertificate(certDir string) (tls.Certificate, []byte, error) {
	if certDir == "" {
		return tls.Certificate{}, nil, os.ErrNotExist
	}
	crt, key := filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")
	if _, err := os.Stat(crt); err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if errors.Is(err, os.ErrNotExist) {
		ca, err = os.ReadFile(crt)
	}
	return cert, ca, err
}

// selfSigned makes a key pair for host that is its own CA.
func selfSigned(host string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "stackpilot-controller runner channel"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caPEM, nil
}
