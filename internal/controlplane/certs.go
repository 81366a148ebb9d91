package controlplane

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"

	"github.com/stackpilot/stackpilot/internal/pki"
)

// certs is the key material of one control plane, written under <dir>/pki and
// made fresh on every Start: one CA signs the API server's serving
// certificate and the admin's client certificate (the API server trusts it as
// its client CA), and an RSA key pair signs service-account tokens, so that
// TokenRequest works as in a real cluster.
type certs struct {
	// CA is the CA certificate file; caPEM its contents.
	CA    string
	caPEM []byte
	// ServingCert/Key serve https://127.0.0.1:<port>.
	ServingCert, ServingKey string
	// AdminCert/Key (PEM) authenticate as AdminUser in AdminGroup; they stay
	// in memory, embedded in Config and the kubeconfig.
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

func newCerts(dir string) (*certs, error) {
	ca, err := pki.NewAuthority(dir, "stackpilot-controlplane-ca")
	if err != nil {
		return nil, err
	}
	c := &certs{CA: ca.Cert, caPEM: ca.PEM}
	c.ServingCert, c.ServingKey, err = ca.IssueFiles(dir, "apiserver", pki.Leaf{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		Usage:   x509.ExtKeyUsageServerAuth,
		DNS:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPs:     []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	})
	if err != nil {
		return nil, err
	}
	c.AdminCert, c.AdminKey, err = ca.Issue(pki.Leaf{
		Subject: pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
		Usage:   x509.ExtKeyUsageClientAuth,
	})
	if err != nil {
		return nil, err
	}
	c.SAKey, c.SAPub, err = pki.ServiceAccountKey(dir)
	if err != nil {
		return nil, err
	}
	return c, nil
}
