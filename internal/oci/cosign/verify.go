package cosign

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	intotov1 "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/types"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"google.golang.org/protobuf/encoding/protojson"
)

// Formats reported in Verified.Format.
const (
	FormatBundle = "bundle"
	FormatLegacy = "legacy"
)

// Verified says which signature verified.
type Verified struct {
	Format string // FormatBundle or FormatLegacy
	KeyID  string // the PublicKey.KeyID that verified it
}

// Verify succeeds when any signature of the manifest digest in repository verifies with any
// of keys: first the Sigstore bundles among the artifact's referrers (the referrers API, or
// the referrers tag schema), then the legacy sha256-HEX.sig tag. It is offline: no Rekor, no
// Fulcio, no TUF; only the keys are trusted.
//
// A signature counts only when it is over this digest: a bundle's in-toto subject must be the
// digest and its predicate type cosign's "sign" (an attestation such as an SBOM signed by the
// same key is not a signature), a legacy payload's docker-manifest-digest must be the digest.
//
// It returns *VerificationError when no signature verifies, and the registry's error, wrapped,
// when the signatures cannot be read.
func Verify(ctx context.Context, repository, digest string, keys []PublicKey, ro []remote.Option, no ...name.Option) (Verified, error) {
	ref, err := name.NewDigest(repository+"@"+digest, no...)
	if err != nil {
		return Verified{}, fmt.Errorf("%q@%q is not an artifact reference (want host/repository and sha256:HEX): %w", repository, digest, err)
	}
	v := &verification{ref: ref, keys: keys}
	for _, k := range keys {
		if k.verifier == nil {
			return Verified{}, errors.New("cosign: a PublicKey must come from LoadPublicKey or LoadPublicKeys")
		}
	}
	if len(keys) == 0 {
		return Verified{}, v.failure()
	}
	copts := clientOptions(ctx, ro, no)

	bundles, err := bundlesOf(ctx, ref, copts, no)
	if err != nil {
		return Verified{}, fmt.Errorf("reading the Sigstore bundles of %s: %w", ref, err)
	}
	for _, b := range bundles {
		if ok, res := v.bundle(ctx, b); ok {
			return res, nil
		}
	}

	sigs, err := legacyOf(ref, copts)
	if err != nil {
		return Verified{}, fmt.Errorf("reading the legacy signatures of %s: %w", ref, err)
	}
	for _, s := range sigs {
		if ok, res := v.legacy(ctx, s); ok {
			return res, nil
		}
	}
	return Verified{}, v.failure()
}

// verification collects what was tried, for the error: the first failure of each format.
type verification struct {
	ref     name.Digest
	keys    []PublicKey
	checked int
	reasons []string
	formats map[string]bool
}

func (v *verification) failure() *VerificationError {
	return &VerificationError{Reference: v.ref.String(), Checked: v.checked, Keys: len(v.keys), Reason: strings.Join(v.reasons, "; ")}
}

func (v *verification) fail(format string, err error) {
	if v.formats == nil {
		v.formats = map[string]bool{}
	}
	if !v.formats[format] {
		v.formats[format] = true
		v.reasons = append(v.reasons, fmt.Sprintf("%s signature %d: %v", format, v.checked, err))
	}
}

func hashOf(ref name.Digest) (v1.Hash, error) {
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return v1.Hash{}, fmt.Errorf("digest %q: %w", ref.DigestStr(), err)
	}
	return h, nil
}

// checkOpts is what `cosign verify --key K --insecure-ignore-tlog=true` and Flux's
// verify.provider: cosign with a key use: the key is the only trust, nothing is looked up.
func checkOpts(k PublicKey, claims func(oci.Signature, v1.Hash, map[string]any) error) *cosign.CheckOpts {
	return &cosign.CheckOpts{SigVerifier: k.verifier, Offline: true, IgnoreTlog: true, ClaimVerifier: claims}
}

// bundlesOf lists the Sigstore bundles among the referrers; none is not an error.
func bundlesOf(ctx context.Context, ref name.Digest, copts []ociremote.Option, no []name.Option) ([]*sgbundle.Bundle, error) {
	bundles, _, err := cosign.GetBundles(ctx, ref, copts, no...)
	var none *cosign.ErrNoMatchingAttestations
	if errors.As(err, &none) {
		return nil, nil
	}
	return bundles, err
}

func (v *verification) bundle(ctx context.Context, b *sgbundle.Bundle) (bool, Verified) {
	v.checked++
	h, err := hashOf(v.ref)
	if err != nil {
		v.fail(FormatBundle, err)
		return false, Verified{}
	}
	digest, err := hex.DecodeString(h.Hex)
	if err != nil {
		v.fail(FormatBundle, err)
		return false, Verified{}
	}
	if err := isSignStatement(b); err != nil {
		v.fail(FormatBundle, err)
		return false, Verified{}
	}
	for _, k := range v.keys {
		// WithArtifactDigest makes sigstore-go check that the statement's subject is this digest.
		_, err := cosign.VerifyNewBundle(ctx, checkOpts(k, nil), verify.WithArtifactDigest(h.Algorithm, digest), b)
		if err == nil {
			return true, Verified{Format: FormatBundle, KeyID: k.KeyID()}
		}
		v.fail(FormatBundle, err)
	}
	return false, Verified{}
}

// isSignStatement checks the bundle holds a DSSE envelope over an in-toto statement of
// cosign's "sign" predicate type. The signature over it is checked after, by the verifier.
func isSignStatement(b *sgbundle.Bundle) error {
	env := b.GetDsseEnvelope()
	if env == nil {
		return errors.New("the bundle holds no DSSE envelope (a message signature is not a cosign image signature)")
	}
	if env.GetPayloadType() != inTotoPayloadType {
		return fmt.Errorf("the DSSE payload is %q, not an in-toto statement", env.GetPayloadType())
	}
	st, err := statementOf(env.GetPayload())
	if err != nil {
		return err
	}
	if st.PredicateType != types.CosignSignPredicateType {
		return fmt.Errorf("the statement's predicate type is %q, not a cosign signature (%s)", st.PredicateType, types.CosignSignPredicateType)
	}
	return nil
}

// legacyOf lists the signatures in the .sig tag; no tag is no signature.
func legacyOf(ref name.Digest, copts []ociremote.Option) ([]oci.Signature, error) {
	tag, err := ociremote.SignatureTag(ref, copts...)
	if err != nil {
		return nil, err
	}
	sigs, err := ociremote.Signatures(tag, copts...)
	if err != nil {
		return nil, err
	}
	return sigs.Get()
}

func (v *verification) legacy(ctx context.Context, s oci.Signature) (bool, Verified) {
	v.checked++
	h, err := hashOf(v.ref)
	if err != nil {
		v.fail(FormatLegacy, err)
		return false, Verified{}
	}
	for _, k := range v.keys {
		// SimpleClaimVerifier checks the payload names this digest: a signature copied from
		// another artifact's .sig tag does not count.
		if _, err := cosign.VerifyImageSignature(ctx, s, h, checkOpts(k, cosign.SimpleClaimVerifier)); err == nil {
			return true, Verified{Format: FormatLegacy, KeyID: k.KeyID()}
		} else {
			v.fail(FormatLegacy, err)
		}
	}
	return false, Verified{}
}

func statementOf(payload []byte) (*intotov1.Statement, error) {
	st := &intotov1.Statement{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(payload, st); err != nil {
		return nil, fmt.Errorf("the DSSE payload is not an in-toto statement: %w", err)
	}
	return st, nil
}
