package oci

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestFetchCacheIsPerCredentials: a private artifact pulled with one
// tenant's credentials is never handed from the store to a fetch with no
// credentials or other ones: those ask the registry, which refuses them.
// The same credentials still cost no request the second time.
func TestFetchCacheIsPerCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := testenv.NewRegistry(t, testenv.WithRegistryBasicAuth("tenant-a", "a-pass-123"))
	good, err := ocilib.CredentialsFromUserPass("tenant-a:a-pass-123")
	g.Expect(err).NotTo(HaveOccurred())
	wrong, err := ocilib.CredentialsFromUserPass("tenant-b:b-pass-456")
	g.Expect(err).NotTo(HaveOccurred())
	repo := reg.Host() + "/team-a/private"
	withA := &ocilib.Client{Insecure: true, Credentials: good}
	d := push(t, withA, repo, "v1", "name: private\nruntime: yaml\n")
	store := newStore(t)
	f := NewFetcher()

	a, err := f.Fetch(ctx, repo, Revision{Digest: d}, withA, FetchOptions{}, store)
	g.Expect(err).NotTo(HaveOccurred())

	for name, c := range map[string]*ocilib.Client{
		"no credentials":    {Insecure: true},
		"other credentials": {Insecure: true, Credentials: wrong},
	} {
		before := reg.Requests()
		got, err := f.Fetch(ctx, repo, Revision{Digest: d}, c, FetchOptions{}, store)
		var ae *source.AuthError
		g.Expect(errors.As(err, &ae)).To(BeTrue(), "%s: want the registry's refusal, got %v and %+v", name, err, got)
		g.Expect(got.Path).To(BeEmpty(), name)
		g.Expect(reg.Requests()).To(BeNumerically(">", before), "%s: the registry was asked", name)
		g.Expect(err.Error()).NotTo(ContainSubstring("b-pass-456"))
	}

	before := reg.Requests()
	again, err := f.Fetch(ctx, repo, Revision{Tag: "v1", Digest: d}, withA, FetchOptions{}, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(a))
	g.Expect(reg.Requests()).To(Equal(before), "the same credentials are served from the store")
	g.Expect(f.Pulls()).To(BeEquivalentTo(3), "one pull with a's credentials, one refused attempt each for the others")
}
