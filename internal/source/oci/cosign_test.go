package oci

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/oci/cosign"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// The cosign verifier, through the Fetcher: a signature by one of the
// Secret's keys passes, another key's is a VerificationError, and the
// verifier's ID follows the keys, not their names.
func TestCosignVerifierThroughFetch(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := testenv.NewRegistry(t, testenv.WithReferrers(true))
	c := &ocilib.Client{Insecure: true}
	repo := reg.Host() + "/infra/signed"
	signed := push(t, c, repo, "v1", "name: a\nruntime: yaml\n")
	other := push(t, c, repo, "v2", "name: b\nruntime: yaml\n")

	privA, pubA, err := cosign.GenerateKeyPair([]byte("pw"))
	g.Expect(err).NotTo(HaveOccurred())
	privB, pubB, err := cosign.GenerateKeyPair([]byte("pw"))
	g.Expect(err).NotTo(HaveOccurred())
	signerA, err := cosign.LoadSigner(privA, []byte("pw"))
	g.Expect(err).NotTo(HaveOccurred())
	signerB, err := cosign.LoadSigner(privB, []byte("pw"))
	g.Expect(err).NotTo(HaveOccurred())
	opts := cosign.SignOptions{Bundle: true, Legacy: true}
	g.Expect(cosign.Sign(ctx, repo, signed, signerA, opts, c.RemoteOptions(ctx), c.NameOptions()...)).To(Succeed())
	g.Expect(cosign.Sign(ctx, repo, other, signerB, opts, c.RemoteOptions(ctx), c.NameOptions()...)).To(Succeed())

	v, err := NewCosignVerifier(map[string][]byte{"cosign.pub": pubA, "old.pub": pubB[:40]})
	g.Expect(err).To(MatchError(ContainSubstring("old.pub")), "a bad key is named")
	g.Expect(v).To(BeNil())
	v, err = NewCosignVerifier(map[string][]byte{"cosign.pub": pubA})
	g.Expect(err).NotTo(HaveOccurred())
	renamed, err := NewCosignVerifier(map[string][]byte{"team.pub": pubA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renamed.ID()).To(Equal(v.ID()))
	both, err := NewCosignVerifier(map[string][]byte{"a.pub": pubA, "b.pub": pubB})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(both.ID()).NotTo(Equal(v.ID()))

	store := newStore(t)
	f := NewFetcher()
	_, err = f.Fetch(ctx, repo, Revision{Tag: "v1", Digest: signed}, c, FetchOptions{Verifier: v}, store)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Fetch(ctx, repo, Revision{Tag: "v2", Digest: other}, c, FetchOptions{Verifier: v}, store)
	var ve *VerificationError
	g.Expect(errors.As(err, &ve)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("oci://" + repo + ":v2@" + other))
	_, err = f.Fetch(ctx, repo, Revision{Tag: "v2", Digest: other}, c, FetchOptions{Verifier: both}, store)
	g.Expect(err).NotTo(HaveOccurred(), "any key of the Secret may have signed")
}
