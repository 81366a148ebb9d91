package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// push pushes a one-file program under tag and returns its digest.
func push(t *testing.T, c *ocilib.Client, repo, tag, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := c.Push(context.Background(), ocilib.Reference{Repository: repo, Tag: tag}, dir, ocilib.PushOptions{})
	if err != nil {
		t.Fatalf("push %s:%s: %v", repo, tag, err)
	}
	return d
}

func TestResolveTagSemverDigest(t *testing.T) {
	g := NewWithT(t)
	reg := testenv.NewRegistry(t)
	c := &ocilib.Client{Insecure: true}
	repo := reg.Host() + "/infra/web"
	d1 := push(t, c, repo, "1.0.0", "name: a\nruntime: yaml\n")
	d2 := push(t, c, repo, "1.2.0", "name: b\nruntime: yaml\n")
	d3 := push(t, c, repo, "2.0.0", "name: c\nruntime: yaml\n")
	push(t, c, repo, "latest", "name: c\nruntime: yaml\n")
	r := NewResolver()
	ctx := context.Background()

	rev, err := r.Resolve(ctx, repo, Ref{Tag: "1.0.0"}, c, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev).To(Equal(Revision{Tag: "1.0.0", Digest: d1}))
	g.Expect(rev.String()).To(Equal("1.0.0@" + d1))

	rev, err = r.Resolve(ctx, repo, Ref{SemVer: ">=1.0.0 <2.0.0"}, c, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev).To(Equal(Revision{Tag: "1.2.0", Digest: d2}))

	rev, err = r.Resolve(ctx, repo, Ref{}, c, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev).To(Equal(Revision{Tag: "latest", Digest: d3}))

	before := reg.Requests()
	rev, err = r.Resolve(ctx, repo, Ref{Digest: d1}, c, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev.String()).To(Equal(d1))
	g.Expect(reg.Requests()).To(Equal(before), "a digest pin needs no lookup")

	_, err = r.Resolve(ctx, repo, Ref{SemVer: ">=3.0.0"}, c, time.Minute)
	var nf *source.NotFoundError
	g.Expect(errors.As(err, &nf)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("semver >=3.0.0"))

	_, err = r.Resolve(ctx, repo, Ref{Tag: "9.9.9"}, c, time.Minute)
	g.Expect(errors.As(err, &nf)).To(BeTrue(), "%v", err)

	_, err = r.Resolve(ctx, repo, Ref{SemVer: "not a range"}, c, time.Minute)
	g.Expect(source.IsStalling(err)).To(BeTrue(), "%v", err)
}

// A hundred Stacks asking for the same tag within an interval cost one
// lookup; after the interval, one more.
func TestResolveSharesOneLookupPerInterval(t *testing.T) {
	g := NewWithT(t)
	reg := testenv.NewRegistry(t)
	c := &ocilib.Client{Insecure: true}
	repo := reg.Host() + "/infra/shared"
	push(t, c, repo, "stable", "name: a\nruntime: yaml\n")
	base := reg.TagLookups("infra/shared", "stable")

	r := NewResolver()
	now := time.Now()
	var mu sync.Mutex
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each Stack has its own client value with the same settings.
			_, err := r.Resolve(context.Background(), repo, Ref{Tag: "stable"}, &ocilib.Client{Insecure: true}, time.Minute)
			g.Expect(err).NotTo(HaveOccurred())
		}()
	}
	wg.Wait()
	g.Expect(reg.TagLookups("infra/shared", "stable") - base).To(Equal(1))
	g.Expect(r.Lookups()).To(BeEquivalentTo(1))

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	for range 100 {
		_, err := r.Resolve(context.Background(), repo, Ref{Tag: "stable"}, c, time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(reg.TagLookups("infra/shared", "stable") - base).To(Equal(2))

	// A forced resolve (reconcile now) asks again; other credentials never
	// share an answer.
	_, err := r.Resolve(context.Background(), repo, Ref{Tag: "stable"}, c, time.Minute, Force())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reg.TagLookups("infra/shared", "stable") - base).To(Equal(3))
	other, err := ocilib.CredentialsFromUserPass("someone:else")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = r.Resolve(context.Background(), repo, Ref{Tag: "stable"}, &ocilib.Client{Insecure: true, Credentials: other}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reg.TagLookups("infra/shared", "stable") - base).To(Equal(4))
}

func TestResolveAuthErrorNamesNoPassword(t *testing.T) {
	g := NewWithT(t)
	reg := testenv.NewRegistry(t, testenv.WithRegistryBasicAuth("ci", "s3cret-pass"))
	good, err := ocilib.CredentialsFromUserPass("ci:s3cret-pass")
	g.Expect(err).NotTo(HaveOccurred())
	repo := reg.Host() + "/infra/private"
	push(t, &ocilib.Client{Insecure: true, Credentials: good}, repo, "v1", "name: a\nruntime: yaml\n")

	r := NewResolver()
	_, err = r.Resolve(context.Background(), repo, Ref{Tag: "v1"}, &ocilib.Client{Insecure: true, Credentials: good}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	bad, err := ocilib.CredentialsFromUserPass("ci:wrong-pass-123")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = r.Resolve(context.Background(), repo, Ref{Tag: "v1"}, &ocilib.Client{Insecure: true, Credentials: bad}, time.Minute)
	var ae *source.AuthError
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong-pass-123"))
	g.Expect(err.Error()).To(ContainSubstring(reg.Host()))
}

func TestParseRevision(t *testing.T) {
	g := NewWithT(t)
	d := "sha256:" + "ab12000000000000000000000000000000000000000000000000000000000000"[:64]
	for _, rev := range []Revision{{Tag: "v1.2.3", Digest: d}, {Digest: d}} {
		got, err := ParseRevision(rev.String())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(rev))
	}
	_, err := ParseRevision("main@sha1:abc")
	g.Expect(err).To(HaveOccurred())
}
