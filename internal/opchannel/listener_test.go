package opchannel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestEndpointHost(t *testing.T) {
	for in, want := range map[string]string{
		"https://10.0.0.7:9443":                    "10.0.0.7",
		"https://stackpilot.stackpilot-system.svc": "stackpilot.stackpilot-system.svc",
		"stackpilot.stackpilot-system.svc:9443":    "stackpilot.stackpilot-system.svc",
		"https://[fd00::1]:9443":                   "fd00::1",
		"controller":                               "controller",
	} {
		if got, err := endpointHost(in); err != nil || got != want {
			t.Errorf("endpointHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := endpointHost("https://:9443"); err == nil {
		t.Errorf("an endpoint without a host was taken")
	}
}

// The self-signed certificate is valid for the endpoint's DNS name, and a
// client trusting the CA Listen returns reaches it by that name; with
// certDir's key pair, the CA returned is certDir's.
func TestListenCertificates(t *testing.T) {
	const name = "runner-channel.test"
	l, caPEM, err := Listen("127.0.0.1:0", "https://"+name+":9443", "")
	if err != nil {
		t.Fatal(err)
	}
	l.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	get := func(l *Listener, caPEM []byte, serverName string) error {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Start(ctx) }()
		defer func() { cancel(); <-done }()
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}}}
		resp, err := c.Get("https://" + l.Addr().String() + "/")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	if err := get(l, caPEM, name); err != nil {
		t.Errorf("by its name: %v", err)
	}

	// The same key pair from a folder: tls.crt is the CA when there is no ca.crt.
	dir := t.TempDir()
	cert, _, err := selfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	l2, ca2, err := Listen("127.0.0.1:0", "https://elsewhere:1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(ca2) != string(crt) {
		t.Errorf("the CA returned is not certDir's tls.crt")
	}
	l2.Handler = l.Handler
	if err := get(l2, ca2, name); err != nil {
		t.Errorf("with certDir's certificate: %v", err)
	}
}
