package cosign

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/types"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t, "pw")
	for _, mode := range registryModes {
		for _, tc := range []struct {
			opts SignOptions
			want string
		}{
			{SignOptions{Bundle: true, Legacy: true}, FormatBundle},
			{SignOptions{Bundle: true}, FormatBundle},
			{SignOptions{Legacy: true}, FormatLegacy},
		} {
			t.Run(mode.name+"/"+tc.want, func(t *testing.T) {
				repo := newRegistry(t, mode.referrers) + "/app"
				digest := pushRandom(t, repo, "v1")
				if err := Sign(ctx, repo, digest, k.signer, tc.opts, remoteOpts()); err != nil {
					t.Fatal(err)
				}
				got, err := Verify(ctx, repo, digest, k.keys, remoteOpts())
				if err != nil {
					t.Fatal(err)
				}
				if got.Format != tc.want || got.KeyID != k.keys[0].KeyID() {
					t.Errorf("Verify = %+v, want format %s with key %s", got, tc.want, k.keys[0].KeyID())
				}
			})
		}
	}
}

// TestSignWritesBothFormats checks the registry holds what other verifiers look for: a
// referrer whose artifact type is the v0.3 bundle media type, and the .sig tag.
func TestSignWritesBothFormats(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t, "")
	for _, mode := range registryModes {
		t.Run(mode.name, func(t *testing.T) {
			repo := newRegistry(t, mode.referrers) + "/app"
			digest := pushRandom(t, repo, "v1")
			if err := Sign(ctx, repo, digest, k.signer, SignOptions{Bundle: true, Legacy: true}, remoteOpts()); err != nil {
				t.Fatal(err)
			}
			d, _ := name.NewDigest(repo + "@" + digest)
			idx, err := remote.Referrers(d, remoteOpts()...)
			if err != nil {
				t.Fatal(err)
			}
			im, _ := idx.IndexManifest()
			if len(im.Manifests) != 1 {
				t.Fatalf("referrers = %+v, want one", im.Manifests)
			}
			// The referrer manifest is cosign's: artifact type and single layer of the bundle's
			// media type. (go-containerregistry's registry lists the config media type as the
			// artifact type in its referrers API answer, so the manifest itself is checked.)
			desc, err := remote.Get(d.Context().Digest(im.Manifests[0].Digest.String()), remoteOpts()...)
			if err != nil {
				t.Fatal(err)
			}
			var rm struct {
				ArtifactType string
				Layers       []struct{ MediaType string }
				Subject      struct{ Digest string }
			}
			if err := json.Unmarshal(desc.Manifest, &rm); err != nil {
				t.Fatal(err)
			}
			if rm.ArtifactType != bundleMediaType || len(rm.Layers) != 1 || rm.Layers[0].MediaType != bundleMediaType || rm.Subject.Digest != digest {
				t.Errorf("referrer manifest = %s, want cosign's v0.3 bundle referrer of %s", desc.Manifest, digest)
			}
			sigTag := repo + ":sha256-" + strings.TrimPrefix(digest, "sha256:") + ".sig"
			tag, _ := name.NewTag(sigTag)
			img, err := remote.Image(tag, remoteOpts()...)
			if err != nil {
				t.Fatalf("legacy tag %s: %v", sigTag, err)
			}
			m, _ := img.Manifest()
			if len(m.Layers) != 1 || m.Layers[0].Annotations["dev.cosignproject.cosign/signature"] == "" ||
				m.Layers[0].MediaType != "application/vnd.dev.cosign.simplesigning.v1+json" {
				t.Errorf("legacy signature layers = %+v", m.Layers)
			}
		})
	}
}

const bundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

func TestSignTwoKeysBothVerify(t *testing.T) {
	ctx := context.Background()
	a, b := newTestKey(t, "a"), newTestKey(t, "b")
	repo := newRegistry(t, false) + "/app"
	digest := pushRandom(t, repo, "v1")
	for _, k := range []testKey{a, b, a} {
		if err := Sign(ctx, repo, digest, k.signer, SignOptions{Legacy: true}, remoteOpts()); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []testKey{a, b} {
		got, err := Verify(ctx, repo, digest, k.keys, remoteOpts())
		if err != nil || got.KeyID != k.keys[0].KeyID() {
			t.Errorf("Verify with key %s = %+v, %v", k.keys[0].KeyID(), got, err)
		}
	}
	// Signing again with the same key does not add a duplicate layer.
	tag, _ := name.NewTag(repo + ":sha256-" + strings.TrimPrefix(digest, "sha256:") + ".sig")
	img, err := remote.Image(tag, remoteOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := img.Manifest(); len(m.Layers) != 2 {
		t.Errorf("the .sig tag has %d signatures, want 2 (one per key)", len(m.Layers))
	}
}

func TestVerifyTriesEveryKey(t *testing.T) {
	ctx := context.Background()
	a, b := newTestKey(t, "a"), newTestKey(t, "b")
	repo := newRegistry(t, true) + "/app"
	digest := pushRandom(t, repo, "v1")
	if err := Sign(ctx, repo, digest, b.signer, SignOptions{Bundle: true, Legacy: true}, remoteOpts()); err != nil {
		t.Fatal(err)
	}
	got, err := Verify(ctx, repo, digest, append(append([]PublicKey{}, a.keys...), b.keys...), remoteOpts())
	if err != nil || got.KeyID != b.keys[0].KeyID() {
		t.Fatalf("Verify([a, b]) = %+v, %v: want b's key", got, err)
	}
}

func TestVerifyRejects(t *testing.T) {
	ctx := context.Background()
	signer, other := newTestKey(t, "s"), newTestKey(t, "o")
	for _, mode := range registryModes {
		t.Run(mode.name, func(t *testing.T) {
			repo := newRegistry(t, mode.referrers) + "/app"
			signed := pushRandom(t, repo, "signed")
			unsigned := pushRandom(t, repo, "unsigned")
			if err := Sign(ctx, repo, signed, signer.signer, SignOptions{Bundle: true, Legacy: true}, remoteOpts()); err != nil {
				t.Fatal(err)
			}

			t.Run("unsigned", func(t *testing.T) {
				expectVerificationError(t, repo, unsigned, signer.keys, "no signature found for "+repo+"@"+unsigned)
			})
			t.Run("another key", func(t *testing.T) {
				expectVerificationError(t, repo, signed, other.keys, "no signature of "+repo+"@"+signed+" verifies with the given keys (2 checked against 1 key)")
			})
			t.Run("no key", func(t *testing.T) {
				expectVerificationError(t, repo, signed, nil, "no public key")
			})
		})
	}
}

// TestVerifyRejectsSignatureOfAnotherDigest copies both signatures of one artifact to where
// another artifact's signatures are looked up: the bundle as a referrer of the other digest,
// the legacy signature into the other digest's .sig tag. Neither is a signature of it.
func TestVerifyRejectsSignatureOfAnotherDigest(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t, "pw")
	for _, mode := range registryModes {
		t.Run(mode.name, func(t *testing.T) {
			repo := newRegistry(t, mode.referrers) + "/app"
			signed := pushRandom(t, repo, "signed")
			victim := pushRandom(t, repo, "victim")
			if err := Sign(ctx, repo, signed, k.signer, SignOptions{Bundle: true, Legacy: true}, remoteOpts()); err != nil {
				t.Fatal(err)
			}
			copts := clientOptions(ctx, remoteOpts(), nil)
			signedRef, _ := name.NewDigest(repo + "@" + signed)
			victimRef, _ := name.NewDigest(repo + "@" + victim)

			bundles, _, err := cosign.GetBundles(ctx, signedRef, copts)
			if err != nil || len(bundles) != 1 {
				t.Fatalf("bundles of the signed artifact: %d, %v", len(bundles), err)
			}
			raw, err := protojson.Marshal(bundles[0].Bundle)
			if err != nil {
				t.Fatal(err)
			}
			if err := ociremote.WriteAttestationNewBundleFormat(victimRef, raw, types.CosignSignPredicateType, copts...); err != nil {
				t.Fatal(err)
			}
			expectVerificationError(t, repo, victim, k.keys, "bundle signature 1:")

			sigs, err := legacyOf(signedRef, copts)
			if err != nil || len(sigs) != 1 {
				t.Fatalf("legacy signatures of the signed artifact: %d, %v", len(sigs), err)
			}
			src, _ := ociremote.SignatureTag(signedRef, copts...)
			dst, _ := ociremote.SignatureTag(victimRef, copts...)
			img, err := remote.Image(src, remoteOpts()...)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(dst, img, remoteOpts()...); err != nil {
				t.Fatal(err)
			}
			err = expectVerificationError(t, repo, victim, k.keys, "(2 checked against 1 key)")
			if err != nil && !strings.Contains(err.Error(), "subject") && !strings.Contains(err.Error(), "digest") {
				t.Errorf("error %q does not say the digest did not match", err)
			}
		})
	}
}

func expectVerificationError(t *testing.T, repo, digest string, keys []PublicKey, want string) error {
	t.Helper()
	got, err := Verify(context.Background(), repo, digest, keys, remoteOpts())
	t.Logf("Verify: %v", err)
	var ve *VerificationError
	if !errors.As(err, &ve) {
		t.Fatalf("Verify = %+v, %v: want a *VerificationError", got, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Verify error:\n  %s\nwant it to contain:\n  %s", err, want)
	}
	return err
}

func TestSignRefusesMissingArtifact(t *testing.T) {
	k := newTestKey(t, "")
	repo := newRegistry(t, true) + "/app"
	err := Sign(context.Background(), repo, "sha256:"+strings.Repeat("a", 64), k.signer, SignOptions{Legacy: true}, remoteOpts())
	if err == nil || !strings.Contains(err.Error(), "reading the artifact") {
		t.Fatalf("Sign of a digest nobody pushed: %v", err)
	}
}

// TestVerifyRejectsAttestation: an in-toto attestation of another predicate type (an SBOM, a
// provenance) signed by the right key is not a signature of the artifact.
func TestVerifyRejectsAttestation(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t, "pw")
	repo := newRegistry(t, true) + "/app"
	digest := pushRandom(t, repo, "v1")
	ref, _ := name.NewDigest(repo + "@" + digest)
	const sbom = "https://spdx.dev/Document"
	raw, err := newBundle(ctx, ref, k.signer, sbom)
	if err != nil {
		t.Fatal(err)
	}
	if err := ociremote.WriteAttestationNewBundleFormat(ref, raw, sbom, clientOptions(ctx, remoteOpts(), nil)...); err != nil {
		t.Fatal(err)
	}
	expectVerificationError(t, repo, digest, k.keys, `predicate type is "https://spdx.dev/Document"`)
}
