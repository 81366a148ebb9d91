package flux

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/zeebo/blake3"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha256Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// server serves body at /a.tar.gz, failing the first failures requests
// with 503, and counts requests.
func server(t *testing.T, body []byte, failures int32) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= failures {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func newStore(t *testing.T) *artifact.Store {
	s, err := artifact.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fastFetcher() *Fetcher {
	f := NewFetcher()
	f.Backoff = time.Millisecond
	return f
}

func TestFetchVerifiesAndCachesByDigest(t *testing.T) {
	g := NewWithT(t)
	body := tarball(t, map[string]string{"app/Pulumi.yaml": "name: app\nruntime: yaml\n"})
	srv, requests := server(t, body, 2)
	store := newStore(t)
	f := fastFetcher()
	art := Artifact{URL: srv.URL + "/a.tar.gz", Revision: "main@sha1:abc", Digest: sha256Digest(body)}

	a, err := f.Fetch(context.Background(), art, store)
	g.Expect(err).NotTo(HaveOccurred(), "two 503s are retried")
	b, err := os.ReadFile(filepath.Join(a.Path, "app", "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("name: app"))
	g.Expect(requests.Load()).To(BeEquivalentTo(3))

	again, err := f.Fetch(context.Background(), art, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(a))
	g.Expect(requests.Load()).To(BeEquivalentTo(3), "a digest fetched before is not downloaded again")
}

func TestFetchGivesUpAfterAttempts(t *testing.T) {
	g := NewWithT(t)
	body := tarball(t, map[string]string{"Pulumi.yaml": "x"})
	srv, requests := server(t, body, 100)
	_, err := fastFetcher().Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: sha256Digest(body)}, newStore(t))
	g.Expect(err).To(MatchError(ContainSubstring("503")))
	g.Expect(err).To(MatchError(ContainSubstring("tried 3 times")))
	g.Expect(requests.Load()).To(BeEquivalentTo(3))
}

func TestFetchRefusesAWrongDigestNamingBoth(t *testing.T) {
	g := NewWithT(t)
	body := tarball(t, map[string]string{"Pulumi.yaml": "x"})
	srv, requests := server(t, body, 0)
	store := newStore(t)
	published := sha256Digest([]byte("something else"))
	_, err := fastFetcher().Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: published}, store)
	var de *DigestError
	g.Expect(errors.As(err, &de)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(published))
	g.Expect(err.Error()).To(ContainSubstring(sha256Digest(body)))
	g.Expect(requests.Load()).To(BeEquivalentTo(1), "a wrong digest is not retried")
	entries, _ := os.ReadDir(filepath.Join(store.Root(), "sha256"))
	g.Expect(entries).To(BeEmpty())
}

// Every algorithm source-controller's --artifact-digest-algo writes.
func TestFetchVerifiesEveryFluxDigestAlgorithm(t *testing.T) {
	body := tarball(t, map[string]string{"Pulumi.yaml": "x"})
	s384 := sha512.Sum384(body)
	s512 := sha512.Sum512(body)
	b3 := blake3.Sum256(body)
	for _, d := range []string{
		sha256Digest(body),
		"sha384:" + hex.EncodeToString(s384[:]),
		"sha512:" + hex.EncodeToString(s512[:]),
		"blake3:" + hex.EncodeToString(b3[:]),
	} {
		g := NewWithT(t)
		srv, _ := server(t, body, 0)
		_, err := fastFetcher().Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: d}, newStore(t))
		g.Expect(err).NotTo(HaveOccurred(), d)
		bad := d[:len(d)-1] + map[bool]string{true: "1", false: "0"}[d[len(d)-1] == '0']
		_, err = fastFetcher().Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: bad}, newStore(t))
		var de *DigestError
		g.Expect(errors.As(err, &de)).To(BeTrue(), "%s: %v", bad, err)
	}
	_, err := fastFetcher().Fetch(context.Background(), Artifact{URL: "http://x", Revision: "r", Digest: "md5:abc"}, newStore(t))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("not one of sha256, sha384, sha512 or blake3")))
}

func TestFetchBoundsTheSize(t *testing.T) {
	g := NewWithT(t)
	body := tarball(t, map[string]string{"Pulumi.yaml": "x", "big": string(bytes.Repeat([]byte{'a'}, 1<<20))})
	srv, requests := server(t, body, 0)
	f := fastFetcher()
	f.MaxSize = int64(len(body)) - 1
	size := int64(len(body))
	_, err := f.Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: sha256Digest(body), Size: &size}, newStore(t))
	var le *LimitError
	g.Expect(errors.As(err, &le)).To(BeTrue(), "%v", err)
	g.Expect(requests.Load()).To(BeZero(), "the announced size is checked before the download")

	// No announced size: the download stops past the bound.
	_, err = f.Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: sha256Digest(body)}, newStore(t))
	g.Expect(errors.As(err, &le)).To(BeTrue(), "%v", err)

	// Files bounded too: a small tarball of a large file.
	f.MaxSize = 64 << 10
	_, err = f.Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: sha256Digest(body)}, newStore(t))
	var ale *artifact.LimitError
	g.Expect(errors.As(err, &ale)).To(BeTrue(), "%v", err)
}

func TestFetchRefusesUnsafeEntries(t *testing.T) {
	g := NewWithT(t)
	body := tarball(t, map[string]string{"Pulumi.yaml": "x", "../../etc/evil": "x"})
	srv, _ := server(t, body, 0)
	_, err := fastFetcher().Fetch(context.Background(), Artifact{URL: srv.URL, Revision: "r", Digest: sha256Digest(body)}, newStore(t))
	var ue *artifact.UnsafePathError
	g.Expect(errors.As(err, &ue)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("../../etc/evil"))
}
