package cosign

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// GenerateKeyPair returns a new ECDSA P-256 key pair in cosign's format: the private key PEM
// is "ENCRYPTED SIGSTORE PRIVATE KEY" (scrypt and secretbox under password), the public key a
// PKIX "PUBLIC KEY" PEM. `cosign sign --key` reads the private key with COSIGN_PASSWORD set to
// the same password; an empty password is allowed, as in cosign.
func GenerateKeyPair(password []byte) (privPEM, pubPEM []byte, err error) {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, nil, fmt.Errorf("generating the cosign key pair: %w", err)
	}
	return keys.PrivateBytes, keys.PublicBytes, nil
}

// Signer signs with a private key loaded by LoadSigner. It holds the decrypted key: keep it
// in memory only and never print it (String says which key it is, not what).
type Signer struct {
	sv  signature.SignerVerifier
	pub PublicKey
}

// LoadSigner decrypts a cosign private key (cosign.key: "ENCRYPTED SIGSTORE PRIVATE KEY", or
// the older "ENCRYPTED COSIGN PRIVATE KEY") with password.
func LoadSigner(privPEM, password []byte) (*Signer, error) {
	sv, err := cosign.LoadPrivateKey(privPEM, password, nil)
	if err != nil {
		// cosign's messages ("decrypt: encrypted: decryption failed") do not say what to do.
		return nil, fmt.Errorf("loading the cosign private key (a cosign.key PEM, decrypted with the password given, COSIGN_PASSWORD for the CLI): %w", err)
	}
	pk, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("reading the public half of the cosign private key: %w", err)
	}
	pub, err := newPublicKey(pk)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv, pub: pub}, nil
}

// PublicKey is the public half of the signer's key.
func (s *Signer) PublicKey() PublicKey { return s.pub }

// String names the key by its ID only.
func (s *Signer) String() string { return "<cosign signer " + s.pub.KeyID() + ">" }

// GoString keeps %#v from printing the private key.
func (s *Signer) GoString() string { return s.String() }

// PublicKey is one key signatures are verified with.
type PublicKey struct {
	verifier signature.Verifier
	key      crypto.PublicKey
	der      []byte // PKIX
	id       string
}

// KeyID is "sha256:" and the hex SHA-256 of the key's PKIX encoding: the same key always has
// the same ID, and it says nothing secret.
func (k PublicKey) KeyID() string { return k.id }

// PEM returns the key as cosign writes cosign.pub.
func (k PublicKey) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: string(cryptoutils.PublicKeyPEMType), Bytes: k.der})
}

// LoadPublicKeys parses cosign public keys (cosign.pub files, "PUBLIC KEY" PEM). An error names
// the key by its position, counting from 1; LoadPublicKey names it by the caller's name.
func LoadPublicKeys(pems ...[]byte) ([]PublicKey, error) {
	if len(pems) == 0 {
		return nil, errors.New("no cosign public key given: pass at least one cosign.pub")
	}
	keys := make([]PublicKey, 0, len(pems))
	for i, p := range pems {
		k, err := LoadPublicKey(fmt.Sprintf("public key %d of %d", i+1, len(pems)), p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// LoadPublicKey parses one cosign public key; name (a file or Secret key name) is used in the
// error only.
func LoadPublicKey(name string, pemBytes []byte) (PublicKey, error) {
	pk, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%s is not a cosign public key (want a PEM \"PUBLIC KEY\" block as in cosign.pub): %w", name, err)
	}
	k, err := newPublicKey(pk)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%s: %w", name, err)
	}
	return k, nil
}

func newPublicKey(pk crypto.PublicKey) (PublicKey, error) {
	// cosign's defaults: the key's usual hash, and ed25519ph for Ed25519 keys.
	v, err := signature.LoadDefaultVerifier(pk, *cosign.GetDefaultLoadOptions(nil)...)
	if err != nil {
		return PublicKey{}, fmt.Errorf("unsupported public key (cosign keys are ECDSA, RSA or Ed25519): %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		return PublicKey{}, fmt.Errorf("encoding the public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return PublicKey{verifier: v, key: pk, der: der, id: "sha256:" + hex.EncodeToString(sum[:])}, nil
}
