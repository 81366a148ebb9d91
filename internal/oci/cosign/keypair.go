package cosign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/sigstore/cosign/v3/pkg/cosign"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/signature"
	signatureoptions "github.com/sigstore/sigstore/pkg/signature/options"
)

// keypair lets sigstore-go's bundle signer (sign.Bundle) use a Signer. It does what cosign's
// own (internal) adapter does, so the bundle is the one `cosign sign --key` writes: the key
// hint is the base64 SHA-256 of the PKIX public key, and the signature is over the hash the
// key's default algorithm names.
type keypair struct {
	s    *Signer
	algo signature.AlgorithmDetails
}

var _ sign.Keypair = (*keypair)(nil)

func newKeypair(s *Signer) (*keypair, error) {
	algo, err := signature.GetDefaultAlgorithmDetails(s.pub.key, *cosign.GetDefaultLoadOptions(nil)...)
	if err != nil {
		return nil, fmt.Errorf("choosing the signature algorithm for %s: %w", s.pub.KeyID(), err)
	}
	return &keypair{s: s, algo: algo}, nil
}

func (k *keypair) GetHashAlgorithm() protocommon.HashAlgorithm { return k.algo.GetProtoHashType() }

func (k *keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.algo.GetSignatureAlgorithm()
}

func (k *keypair) GetHint() []byte {
	sum := sha256.Sum256(k.s.pub.der)
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

func (k *keypair) GetKeyAlgorithm() string {
	switch k.s.pub.key.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA"
	case *rsa.PublicKey:
		return "RSA"
	case ed25519.PublicKey:
		return "ED25519"
	}
	return ""
}

func (k *keypair) GetPublicKey() crypto.PublicKey { return k.s.pub.key }

func (k *keypair) GetPublicKeyPem() (string, error) { return string(k.s.pub.PEM()), nil }

// SignData signs data and returns the signature and the digest it signed (nil for pure
// Ed25519, which signs the message itself).
func (k *keypair) SignData(ctx context.Context, data []byte) ([]byte, []byte, error) {
	opts := []signature.SignOption{signatureoptions.WithContext(ctx)}
	var digest []byte
	if h := k.algo.GetHashType(); h != 0 {
		hh := h.New()
		hh.Write(data)
		digest = hh.Sum(nil)
		opts = append(opts, signatureoptions.WithDigest(digest))
	}
	sig, err := k.s.sv.SignMessage(bytes.NewReader(data), opts...)
	if err != nil {
		return nil, nil, err
	}
	return sig, digest, nil
}
