package flux

import (
	"context"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/source"
)

// TestSourceMetricsCountDownloads: every download attempt (retries too) is one
// flux-artifact request under the server's host, and a digest in the store
// is none.
func TestSourceMetricsCountDownloads(t *testing.T) {
	g := NewWithT(t)
	body := tarball(t, map[string]string{"app/Pulumi.yaml": "name: app\nruntime: yaml\n"})
	srv, _ := server(t, body, 1)
	u, err := url.Parse(srv.URL)
	g.Expect(err).NotTo(HaveOccurred())
	before := source.RequestCount(source.KindFluxArtifact, u.Host)
	f := fastFetcher()
	art := Artifact{URL: srv.URL + "/gitrepository/ns/app/abc.tar.gz", Revision: "main@sha1:abc", Digest: sha256Digest(body)}
	store := newStore(t)
	for range 2 {
		_, err := f.Fetch(context.Background(), art, store)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(source.RequestCount(source.KindFluxArtifact, u.Host)-before).To(Equal(2.0), "one 503 and its retry; the second fetch is from the store")
}
