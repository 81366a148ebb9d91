package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestIssueChains proves what the API servers rely on: a serving certificate
// that verifies against the CA for its names, a client certificate that
// verifies for client auth and carries its group, and keys that match.
func TestIssueChains(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca, err := NewAuthority(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if onDisk, err := os.ReadFile(ca.Cert); err != nil || string(onDisk) != string(ca.PEM) {
		t.Fatalf("%s: %v; want the CA's PEM", ca.Cert, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.PEM) {
		t.Fatal("CA PEM does not parse")
	}

	certPath, keyPath, err := ca.IssueFiles(dir, "server", Leaf{
		Subject: pkix.Name{CommonName: "server"},
		Usage:   x509.ExtKeyUsageServerAuth,
		DNS:     []string{"localhost"},
		IPs:     []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if certPath != filepath.Join(dir, "server.crt") || keyPath != filepath.Join(dir, "server.key") {
		t.Errorf("paths %s, %s", certPath, keyPath)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v, %v; want 0600", fi.Mode(), err)
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatalf("server key does not match its certificate: %v", err)
	}
	server := pair.Leaf
	for _, host := range []string{"localhost", "127.0.0.1"} {
		if _, err := server.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}

	certPEM, keyPEM, err := ca.Issue(Leaf{
		Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		Usage:   x509.ExtKeyUsageClientAuth,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("client key does not match its certificate: %v", err)
	}
	block, _ := pem.Decode(certPEM)
	client, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies as a serving one")
	}
	if got := client.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("client organization %v, want the group", got)
	}
	if client.SerialNumber.Cmp(server.SerialNumber) == 0 {
		t.Error("two certificates of one CA share a serial")
	}
}

// TestServiceAccountKey proves the pair is RSA (RS256 tokens) and matches.
func TestServiceAccountKey(t *testing.T) {
	dir := t.TempDir()
	keyPath, pubPath, err := ServiceAccountKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := os.ReadFile(keyPath)
	pubPEM, _ := os.ReadFile(pubPath)
	kb, _ := pem.Decode(keyPEM)
	pb, _ := pem.Decode(pubPEM)
	if kb == nil || pb == nil {
		t.Fatalf("%s or %s is not PEM", keyPath, pubPath)
	}
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(pb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(pub) {
		t.Error("sa.pub is not the public half of sa.key")
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("sa.key mode: %v, %v; want 0600", fi.Mode(), err)
	}
}
