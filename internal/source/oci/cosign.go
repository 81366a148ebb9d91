package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"

	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/oci/cosign"
)

// CosignVerifier accepts an artifact that a cosign signature (a Sigstore
// bundle or the legacy .sig tag) made with one of its keys covers. It is
// offline: only the keys are trusted.
type CosignVerifier struct {
	keys []cosign.PublicKey
	id   string
}

// NewCosignVerifier parses public keys given by name (a Secret's data keys,
// such as "cosign.pub"); an error names the key at fault.
func NewCosignVerifier(named map[string][]byte) (*CosignVerifier, error) {
	if len(named) == 0 {
		return nil, errors.New("no cosign public key given")
	}
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	v := &CosignVerifier{}
	for _, n := range names {
		k, err := cosign.LoadPublicKey(n, named[n])
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, k)
		// The keys themselves, not their names, decide what is trusted.
		h.Write(k.PEM())
	}
	v.id = "cosign:" + hex.EncodeToString(h.Sum(nil))
	return v, nil
}

// ID fingerprints the trusted keys.
func (v *CosignVerifier) ID() string { return v.id }

// Verify checks repository@digest's signatures with the keys, through
// client (its credentials and plain-HTTP setting).
func (v *CosignVerifier) Verify(ctx context.Context, repository, digest string, client *ocilib.Client) error {
	_, err := cosign.Verify(ctx, repository, digest, v.keys, client.RemoteOptions(ctx), client.NameOptions()...)
	var verr *cosign.VerificationError
	if errors.As(err, &verr) {
		return &VerificationError{Err: verr}
	}
	return err
}
