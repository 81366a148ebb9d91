// Package pki makes the key material of the control planes this project runs
// on the machine (internal/controlplane, dev/internal/cluster): a CA, certificates
// it signs, and the key pair that signs service-account tokens. Everything is
// made fresh for one run and lives only as long as the control plane does, so
// there is no renewal, revocation or key storage beyond files of mode 0600.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Every certificate is valid from an hour ago, so a verifier whose clock is a
// little behind accepts it, for a year, far beyond any run.
const (
	backdate      = time.Hour
	lifetimeYears = 1
)

// Authority is a CA: its certificate, written to Cert, and the key it signs with.
type Authority struct {
	// Cert is the CA certificate file; PEM its contents.
	Cert string
	PEM  []byte

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewAuthority makes a CA named commonName and writes its certificate to
// <dir>/ca.crt, making dir (mode 0700: keys go there too) if it is missing.
func NewAuthority(dir, commonName string) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-backdate),
		NotAfter:              time.Now().AddDate(lifetimeYears, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	a := &Authority{Cert: filepath.Join(dir, "ca.crt"), PEM: encode("CERTIFICATE", der), cert: cert, key: key}
	if err := os.WriteFile(a.Cert, a.PEM, 0o644); err != nil {
		return nil, err
	}
	return a, nil
}

// Leaf describes a certificate to issue: whom it names, what it is for
// (serving or client authentication), and for a server the names it answers to.
type Leaf struct {
	Subject pkix.Name
	Usage   x509.ExtKeyUsage
	DNS     []string
	IPs     []net.IP
}

// Issue makes a key and a certificate for l signed by a, both PEM. The key is
// ECDSA, so it only signs: KeyEncipherment would mean nothing for it.
func (a *Authority) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      l.Subject,
		NotBefore:    time.Now().Add(-backdate),
		NotAfter:     time.Now().AddDate(lifetimeYears, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{l.Usage},
		DNSNames:     l.DNS,
		IPAddresses:  l.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encode("CERTIFICATE", der), encode("EC PRIVATE KEY", keyDER), nil
}

// IssueFiles issues l as Issue does and writes <dir>/<name>.crt and
// <dir>/<name>.key (the key readable by the owner only), for components that
// take their certificate as a file.
func (a *Authority) IssueFiles(dir, name string, l Leaf) (certPath, keyPath string, err error) {
	certPEM, keyPEM, err := a.Issue(l)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, os.WriteFile(keyPath, keyPEM, 0o600)
}

// serial is random: every run makes a new CA of the same name, and RFC 5280
// wants one issuer's serials unique.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(fmt.Sprintf("pki: random serial: %v", err))
	}
	return n
}

func encode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
