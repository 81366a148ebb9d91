package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

// pki is the key material of one control plane, written under <dir>/pki and
// made fresh on every Start: one CA signs the API server's serving
// certificate and the admin's client certificate (the API server trusts it as
// its client CA), and an RSA key pair signs service-account tokens, so that
// TokenRequest works as in a real cluster.
type pki struct {
	dir string
	// CA is the CA certificate file; caPEM its contents.
	CA    string
	caPEM []byte
	// ServingCert/Key serve https://127.0.0.1:<port>.
	ServingCert, ServingKey string
	// AdminCert/Key (PEM) authenticate as AdminUser in AdminGroup.
	AdminCert, AdminKey []byte
	// SAKey signs service-account tokens; SAPub verifies them.
	SAKey, SAPub string
}

// AdminUser and AdminGroup are the identity of Config and Kubeconfig: the
// group system:masters passes every authorization check.
const (
	AdminUser  = "stackpilot-admin"
	AdminGroup = "system:masters"
)

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	ca, err := p.newCA()
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := issue(ca, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
	if err != nil {
		return nil, err
	}
	p.ServingCert, p.ServingKey = filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	if err := os.WriteFile(p.ServingCert, certPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.ServingKey, keyPEM, 0o600); err != nil {
		return nil, err
	}
	p.AdminCert, p.AdminKey, err = issue(ca, pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	return p, p.serviceAccountKey()
}

func (p *pki) newCA() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "stackpilot-controlplane-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
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
	p.CA = filepath.Join(p.dir, "ca.crt")
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(p.CA, p.caPEM, 0o644); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

// issue makes a key and a certificate signed by ca, both PEM.
func issue(ca *authority, subject pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// serviceAccountKey makes the RSA key pair that signs service-account tokens
// (RS256, what every client library expects).
func (p *pki) serviceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	p.SAKey, p.SAPub = filepath.Join(p.dir, "sa.key"), filepath.Join(p.dir, "sa.pub")
	if err := os.WriteFile(p.SAKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(fmt.Sprintf("controlplane: random serial: %v", err))
	}
	return n
}
