package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"os"
	"path/filepath"
)

// ServiceAccountKey makes the RSA key pair that signs service-account tokens
// and writes <dir>/sa.key (private, for kube-apiserver's signing key and the
// controller manager) and <dir>/sa.pub (for verifying). RSA and not ECDSA:
// RS256 is what every client library expects of a token.
func ServiceAccountKey(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, encode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), 0o600); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, os.WriteFile(pubPath, encode("PUBLIC KEY", pub), 0o644)
}
