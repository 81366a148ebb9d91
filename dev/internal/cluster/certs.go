package cluster

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"net"

	"github.com/stackpilot/stackpilot/internal/pki"
)

// certs is the cluster's key material, all written under <dir>/pki. It is made
// fresh on every Up: nothing outlives the cluster.
type certs struct {
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

// newCerts makes the cluster's keys; the API server's certificate also names
// podGateway, where Pods that are not hostNetwork reach it.
func newCerts(dir string, podGateway net.IP) (*certs, error) {
	ca, err := pki.NewAuthority(dir, "stackpilot-cluster-ca")
	if err != nil {
		return nil, err
	}
	c := &certs{CA: ca.Cert, Tokens: map[string]string{}}
	c.APIServerCert, c.APIServerKey, err = ca.IssueFiles(dir, "apiserver", pki.Leaf{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		Usage:   x509.ExtKeyUsageServerAuth,
		DNS:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		// Pods reach the API server at 127.0.0.1 (host network), at the Pod
		// network's gateway, or (with kube-proxy, which this cluster lacks) at
		// the kubernetes Service's address.
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(serviceIP), podGateway},
	})
	if err != nil {
		return nil, err
	}
	c.KubeletClientCert, c.KubeletClientKey, err = ca.IssueFiles(dir, "apiserver-kubelet-client", pki.Leaf{
		Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		Usage:   x509.ExtKeyUsageClientAuth,
	})
	if err != nil {
		return nil, err
	}
	if c.SAKey, c.SAPub, err = pki.ServiceAccountKey(dir); err != nil {
		return nil, err
	}
	for _, id := range []string{"admin", "controller-manager", "scheduler", "kubelet"} {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		c.Tokens[id] = hex.EncodeToString(b)
	}
	return c, nil
}
