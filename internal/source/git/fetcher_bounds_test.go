package git

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// incompressible returns n random bytes: a pack cannot shrink them.
func incompressible(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// storeIsEmpty: no tree stored, no staging left behind.
func storeIsEmpty(g Gomega, s *artifact.Store) {
	for _, sub := range []string{"sha256", "tmp"} {
		entries, err := os.ReadDir(filepath.Join(s.Root(), sub))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).To(BeEmpty(), sub)
	}
}

// TestFetchStopsAtTheBounds (issue 21, item 3): a repository larger than
// MaxSize, or with more files than MaxFiles, fails with a *LimitError naming
// the bound, whether the revision is fetched shallowly (a branch) or in full
// (a commit pin), and nothing of it is stored. Within the bounds the same
// Fetcher clones as before.
func TestFetchStopsAtTheBounds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	big := srv.Commit(t, "big", "main", map[string]string{"Pulumi.yaml": "name: big", "blob.bin": incompressible(t, 512<<10)}, "big")
	many := map[string]string{"Pulumi.yaml": "name: many"}
	for i := range 40 {
		many[fmt.Sprintf("src/f%02d.txt", i)] = "x"
	}
	manyCommit := srv.Commit(t, "many", "main", many, "many")
	small := srv.Commit(t, "small", "main", map[string]string{"Pulumi.yaml": "name: small"}, "small")
	f := &Fetcher{Timeout: time.Minute, MaxSize: 128 << 10, MaxFiles: 20}

	for _, c := range []struct {
		repo, commit, what string
		max                int64
	}{
		{"big", big, "size of the fetched objects", 128 << 10},
		{"many", manyCommit, "file count", 20},
	} {
		url := srv.URL(c.repo)
		for _, rev := range []Revision{{Ref: "refs/heads/main", Commit: c.commit}, {Commit: c.commit}} {
			store := newTestStore(t)
			_, err := f.Fetch(ctx, url, rev, nil, store)
			var le *LimitError
			g.Expect(errors.As(err, &le)).To(BeTrue(), "%s %s: want a LimitError, got %v", c.repo, rev, err)
			g.Expect(le.What).To(Equal(c.what))
			g.Expect(le.Max).To(Equal(c.max))
			g.Expect(err.Error()).To(ContainSubstring(url))
			g.Expect(err.Error()).To(ContainSubstring(c.commit))
			storeIsEmpty(g, store)
		}
	}

	store := newTestStore(t)
	a, err := f.Fetch(ctx, srv.URL("small"), Revision{Ref: "refs/heads/main", Commit: small}, nil, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(t, a, "Pulumi.yaml")).To(Equal("name: small"))
}
