package opchannel

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
)

// KeepSelfSigned makes sure dir holds a certificate for the runner channel
// (tls.crt, tls.key) valid for endpoint's host for at least another month,
// making a self-signed one when it does not. Listen(addr, endpoint, dir)
// then serves it. Why keep it: a controller that restarts while Jobs run
// adopts them, and their Pods trust only the CA they were given at start;
// a certificate made anew at each start would lock them out.
//
// It is for one replica (a controller outside a Pod): replicas that share
// a Lease share their Pods too, and keep the certificate in a Secret
// (KeepInSecret).
func KeepSelfSigned(dir, endpoint string) error {
	host, err := endpointHost(endpoint)
	if err != nil {
		return err
	}
	if keptCertValid(dir, host) {
		return nil
	}
	certPEM, keyPEM, err := selfSignedPEM(host)
	if err != nil {
		return err
	}
	return writeKeyPair(dir, certPEM, keyPEM)
}

// selfSignedPEM is selfSigned's pair as PEM: the certificate (its own CA)
// and the key.
func selfSignedPEM(host string) (certPEM, keyPEM []byte, err error) {
	cert, caPEM, err := selfSigned(host)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, nil, err
	}
	return caPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writeKeyPair writes tls.key and tls.crt into dir, where Listen reads them.
func writeKeyPair(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The key first: a crash between the two leaves a certificate that does
	// not match the key, which keptCertValid refuses, so the pair is made
	// again; never a key that is gone with a certificate still trusted.
	if err := atomicfile.Write(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return fmt.Errorf("runner channel key: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return fmt.Errorf("runner channel certificate: %w", err)
	}
	return nil
}

// keptCertValid is true when dir's key pair matches, names host and is
// valid for another month.
func keptCertValid(dir, host string) bool {
	certPEM, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		return false
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "tls.key"))
	if err != nil {
		return false
	}
	return certValid(certPEM, keyPEM, host)
}

// certValid is true when the pair matches, names host and is valid for
// another month: a certificate that would expire sooner is replaced at a
// start, while the Pods that trust it have long ended.
func certValid(certPEM, keyPEM []byte, host string) bool {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	if time.Now().AddDate(0, 1, 0).After(leaf.NotAfter) {
		return false
	}
	return leaf.VerifyHostname(host) == nil
}
