package cosign

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	intotov1 "github.com/in-toto/attestation/go/v1"
	cremote "github.com/sigstore/cosign/v3/pkg/cosign/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/cosign/v3/pkg/types"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// SignOptions chooses which signatures Sign writes; the CLI writes both.
type SignOptions struct {
	// Bundle writes the Sigstore bundle as an OCI referrer (what cosign v3 reads first).
	Bundle bool
	// Legacy writes the sha256-HEX.sig tag (what cosign v2 and older verifiers read).
	Legacy bool
}

// inTotoPayloadType is the DSSE payload type of an in-toto statement.
const inTotoPayloadType = "application/vnd.in-toto+json"

// Sign signs the manifest digest ("sha256:…") in repository ("host/path") with s, offline.
// ro carries the caller's auth and transport; no carries name options (name.Insecure for
// plain HTTP off loopback). Signing again adds a signature; it never removes one.
func Sign(ctx context.Context, repository, digest string, s *Signer, opts SignOptions, ro []remote.Option, no ...name.Option) error {
	if s == nil {
		return errors.New("cosign: no signer given")
	}
	if !opts.Bundle && !opts.Legacy {
		return errors.New("cosign: nothing to write: choose the bundle, the legacy signature or both")
	}
	ref, err := name.NewDigest(repository+"@"+digest, no...)
	if err != nil {
		return fmt.Errorf("%q@%q is not an artifact reference (want host/repository and sha256:HEX): %w", repository, digest, err)
	}
	// Both writers need the artifact to exist: the bundle names it as the referrer's subject
	// (its media type and size), and a .sig tag for a digest nobody pushed would be litter.
	if _, err := remote.Head(ref, append(append([]remote.Option{}, ro...), remote.WithContext(ctx))...); err != nil {
		return fmt.Errorf("reading the artifact %s to sign: %w", ref, err)
	}
	copts := clientOptions(ctx, ro, no)
	if opts.Bundle {
		if err := signBundle(ctx, ref, s, copts); err != nil {
			return fmt.Errorf("writing the Sigstore bundle of %s: %w", ref, err)
		}
	}
	if opts.Legacy {
		if err := signLegacy(ref, s, copts); err != nil {
			return fmt.Errorf("writing the legacy signature of %s: %w", ref, err)
		}
	}
	return nil
}

// clientOptions gives cosign's registry code the caller's options only: without
// WithRemoteOptions cosign would add the default Docker keychain.
func clientOptions(ctx context.Context, ro []remote.Option, no []name.Option) []ociremote.Option {
	all := append(append([]remote.Option{}, ro...), remote.WithContext(ctx))
	return []ociremote.Option{ociremote.WithRemoteOptions(all...), ociremote.WithNameOptions(no...)}
}

// signBundle builds the statement `cosign sign` v3 signs (subject: the digest; predicate
// type: cosign's "sign"; empty predicate), signs its DSSE envelope into a v0.3 bundle with the
// key's hint and nothing else (no certificate, no log entry, no timestamp), and pushes it as a
// referrer the way cosign does.
func signBundle(ctx context.Context, ref name.Digest, s *Signer, copts []ociremote.Option) error {
	bundleJSON, err := newBundle(ctx, ref, s, types.CosignSignPredicateType)
	if err != nil {
		return err
	}
	return ociremote.WriteAttestationNewBundleFormat(ref, bundleJSON, types.CosignSignPredicateType, copts...)
}

// newBundle returns the bundle's JSON (protojson, as cosign writes it).
func newBundle(ctx context.Context, ref name.Digest, s *Signer, predicateType string) ([]byte, error) {
	h, err := hashOf(ref)
	if err != nil {
		return nil, err
	}
	statement := &intotov1.Statement{
		Type:          intotov1.StatementTypeUri,
		Subject:       []*intotov1.ResourceDescriptor{{Digest: map[string]string{h.Algorithm: h.Hex}, Annotations: &structpb.Struct{}}},
		PredicateType: predicateType,
		Predicate:     &structpb.Struct{},
	}
	statementJSON, err := protojson.Marshal(statement)
	if err != nil {
		return nil, fmt.Errorf("encoding the in-toto statement: %w", err)
	}
	kp, err := newKeypair(s)
	if err != nil {
		return nil, err
	}
	bundle, err := sign.Bundle(&sign.DSSEData{Data: statementJSON, PayloadType: inTotoPayloadType}, kp, sign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	bundleJSON, err := protojson.Marshal(bundle)
	if err != nil {
		return nil, fmt.Errorf("encoding the bundle: %w", err)
	}
	return bundleJSON, nil
}

// signLegacy signs cosign's simple-signing payload for the digest and adds it to the
// sha256-HEX.sig tag, keeping the signatures already there (a second key adds a layer; the
// same key again is not duplicated).
func signLegacy(ref name.Digest, s *Signer, copts []ociremote.Option) error {
	body, err := (&payload.Cosign{Image: ref}).MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding the payload: %w", err)
	}
	raw, err := s.sv.SignMessage(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	sig, err := static.NewSignature(body, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return err
	}
	// The subject itself is not read (SignedUnknown): only its digest names the .sig tag.
	se, err := mutate.AttachSignatureToEntity(ociremote.SignedUnknown(ref, copts...), sig,
		mutate.WithDupeDetector(cremote.NewDupeDetector(s.sv)))
	if err != nil {
		return err
	}
	return ociremote.WriteSignatures(ref.Repository, se, copts...)
}
