package oci

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestSourceMetricsCountRegistryRequests: 50 concurrent resolutions of one
// tag are one oci-resolve, and fetching the digest three times is one
// oci-pull, counted under the registry's host.
func TestSourceMetricsCountRegistryRequests(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	c := &ocilib.Client{Insecure: true}
	repo := reg.Host() + "/infra/metrics"
	push(t, c, repo, "1.0.0", "name: a\nruntime: yaml\n")
	host := reg.Host()
	resolves := source.RequestCount(source.KindOCIResolve, host)
	pulls := source.RequestCount(source.KindOCIPull, host)

	r := NewResolver()
	var wg sync.WaitGroup
	revs := make([]Revision, 50)
	errs := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			revs[i], errs[i] = r.Resolve(ctx, repo, Ref{Tag: "1.0.0"}, c, time.Hour)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(source.RequestCount(source.KindOCIResolve, host) - resolves).To(Equal(1.0))

	store := newStore(t)
	f := NewFetcher()
	for range 3 {
		_, err := f.Fetch(ctx, repo, revs[0], c, FetchOptions{}, store)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(source.RequestCount(source.KindOCIPull, host) - pulls).To(Equal(1.0))
}
