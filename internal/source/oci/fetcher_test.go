package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/artifact"
	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// keyVerifier stands in for cosign: it accepts the digests it was told to,
// and records what it was asked. (The real verifier is tested in
// internal/oci/cosign and end to end.)
type keyVerifier struct {
	id     string
	accept map[string]bool
	asked  []string
}

func (v *keyVerifier) Verify(_ context.Context, _, digest string, _ *ocilib.Client) error {
	v.asked = append(v.asked, digest)
	if !v.accept[digest] {
		return &VerificationError{Err: errors.New("no signature verifies with the given keys")}
	}
	return nil
}

func (v *keyVerifier) ID() string { return v.id }

func newStore(t *testing.T) *artifact.Store {
	t.Helper()
	s, err := artifact.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func storedTrees(t *testing.T, s *artifact.Store) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Root(), "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestFetchOncePerDigest(t *testing.T) {
	g := NewWithT(t)
	reg := testenv.NewRegistry(t)
	c := &ocilib.Client{Insecure: true}
	repo := reg.Host() + "/infra/app"
	d := push(t, c, repo, "v1", "name: app\nruntime: yaml\n")
	store := newStore(t)
	f := NewFetcher()

	a, err := f.Fetch(context.Background(), repo, Revision{Tag: "v1", Digest: d}, c, FetchOptions{}, store)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile(filepath.Join(a.Path, "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("name: app\nruntime: yaml\n"))

	before := reg.Requests()
	again, err := f.Fetch(context.Background(), repo, Revision{Tag: "other-tag", Digest: d}, c, FetchOptions{}, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(a))
	g.Expect(reg.Requests()).To(Equal(before), "a digest fetched before comes from the store")
	g.Expect(f.Pulls()).To(BeEquivalentTo(1))
}

func TestFetchVerifiesBeforeAnythingIsStored(t *testing.T) {
	g := NewWithT(t)
	reg := testenv.NewRegistry(t)
	c := &ocilib.Client{Insecure: true}
	repo := reg.Host() + "/infra/signed"
	good := push(t, c, repo, "v1", "name: good\nruntime: yaml\n")
	bad := push(t, c, repo, "v2", "name: bad\nruntime: yaml\n")
	store := newStore(t)
	f := NewFetcher()
	v := &keyVerifier{id: "keys-1", accept: map[string]bool{good: true}}

	_, err := f.Fetch(context.Background(), repo, Revision{Tag: "v2", Digest: bad}, c, FetchOptions{Verifier: v}, store)
	var ve *VerificationError
	g.Expect(errors.As(err, &ve)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("oci://" + repo + ":v2@" + bad))
	g.Expect(storedTrees(t, store)).To(Equal(0), "nothing of an unverified artifact is stored")
	g.Expect(f.Pulls()).To(BeEquivalentTo(0))

	_, err = f.Fetch(context.Background(), repo, Revision{Tag: "v1", Digest: good}, c, FetchOptions{Verifier: v}, store)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Fetch(context.Background(), repo, Revision{Tag: "v1", Digest: good}, c, FetchOptions{Verifier: v}, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.asked).To(Equal([]string{bad, good}), "a digest verified with the same keys is not verified again")

	// Other keys: the cached artifact is not used until they accept it.
	other := &keyVerifier{id: "keys-2", accept: map[string]bool{}}
	_, err = f.Fetch(context.Background(), repo, Revision{Tag: "v1", Digest: good}, c, FetchOptions{Verifier: other}, store)
	g.Expect(errors.As(err, &ve)).To(BeTrue(), "%v", err)
}

func TestFetchRefusesTamperedAndOversizedLayers(t *testing.T) {
	g := NewWithT(t)
	reg := testenv.NewRegistry(t)
	c := &ocilib.Client{Insecure: true}
	repo := reg.Host() + "/infra/tampered"
	d := push(t, c, repo, "v1", "name: t\nruntime: yaml\n")
	m, _, err := c.Manifest(context.Background(), ocilib.Reference{Repository: repo, Digest: d})
	g.Expect(err).NotTo(HaveOccurred())
	store := newStore(t)

	small := &Fetcher{MaxSize: m.Layers[0].Size - 1, Timeout: time.Minute}
	_, err = small.Fetch(context.Background(), repo, Revision{Tag: "v1", Digest: d}, c, FetchOptions{}, store)
	var le *ocilib.LimitError
	g.Expect(errors.As(err, &le)).To(BeTrue(), "%v", err)

	reg.TamperBlob(m.Layers[0].Digest.String())
	_, err = NewFetcher().Fetch(context.Background(), repo, Revision{Tag: "v1", Digest: d}, c, FetchOptions{}, store)
	var de *ocilib.DigestError
	g.Expect(errors.As(err, &de)).To(BeTrue(), "%v", err)
	g.Expect(storedTrees(t, store)).To(Equal(0))
}
