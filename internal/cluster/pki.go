package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's key material, all written under <dir>/pki. It is made
// fresh on every Up: nothing outlives the cluster.
type pki struct {
	dir string
	// CA signs the API server's serving certificate and the client certificate
	// the API server shows to the kubelet.
	CA string
	// APIServerCert/Key serve https://127.0.0.1:<port>.
	APIServerCert, APIServerKey string
	// KubeletClientCert/Key: the API server's identity towards the kubelet.
	KubeletClientCert, KubeletClientKey string
	// SAKey signs service-account tokens; SAPub verifies them.
	SAKey, SAPub string
	// Tokens for the static token file: one identity per component.
	Tokens map[string]string
}

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, Tokens: map[string]string{}}
	root, err := p.newCA()
	if err != nil {
		return nil, err
	}
	p.APIServerCert, p.APIServerKey, err = p.issue(root, "apiserver", pkix.Name{CommonName: "kube-apiserver"},
		x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(serviceIP)})
	if err != nil {
		return nil, err
	}
	p.KubeletClientCert, p.KubeletClientKey, err = p.issue(root, "apiserver-kubelet-client",
		pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := p.serviceAccountKey(); err != nil {
		return nil, err
	}
	for _, id := range []string{"admin", "controller-manager", "scheduler", "kubelet"} {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		p.Tokens[id] = hex.EncodeToString(b)
	}
	return p, nil
}

func (p *pki) newCA() (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "stackpilot-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
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
	if err := writePEM(p.CA, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key}, nil
}

func (p *pki) issue(c *ca, name string, subject pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600)
}

// serviceAccountKey makes the RSA key pair that signs projected service-account
// tokens (RS256, what every client library expects).
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
	if err := writePEM(p.SAKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), 0o600); err != nil {
		return err
	}
	return writePEM(p.SAPub, "PUBLIC KEY", pub, 0o644)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(fmt.Sprintf("cluster: random serial: %v", err))
	}
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
