package git

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

func newTestStore(t *testing.T) *artifact.Store {
	t.Helper()
	s, err := artifact.NewStore(filepath.Join(t.TempDir(), "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readFile(t *testing.T, a artifact.Artifact, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(a.Path, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFetchOncePerCommit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	srv.Commit(t, "app", "main", map[string]string{"Pulumi.yaml": "name: app", "old.txt": "old"}, "1")
	srv.Commit(t, "app", "main", map[string]string{"Pulumi.yaml": "name: app v2", "src/index.ts": "export {}"}, "2")
	store := newTestStore(t)
	f := NewFetcher()

	rev, err := NewResolver().Resolve(ctx, url, Ref{Branch: "main"}, nil, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())

	// Many Stacks on the same revision at once: one clone.
	const n = 20
	var wg sync.WaitGroup
	arts := make([]artifact.Artifact, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			arts[i], errs[i] = f.Fetch(ctx, url, rev, nil, store)
		}()
	}
	wg.Wait()
	for i := range n {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(arts[i]).To(Equal(arts[0]))
	}
	g.Expect(f.Clones()).To(Equal(int64(1)))
	a := arts[0]
	g.Expect(a.Digest).To(HavePrefix("sha256:"))
	g.Expect(readFile(t, a, "Pulumi.yaml")).To(Equal("name: app v2"))
	g.Expect(readFile(t, a, "src/index.ts")).To(Equal("export {}"))
	g.Expect(filepath.Join(a.Path, "old.txt")).NotTo(BeAnExistingFile())
	g.Expect(filepath.Join(a.Path, ".git")).NotTo(BeAnExistingFile())

	// Later fetches are served by the index: no network at all, even
	// from a new Fetcher (a restarted controller with the same data dir).
	before := srv.Requests()
	again, err := NewFetcher().Fetch(ctx, url, rev, nil, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(a))
	g.Expect(srv.Requests()).To(Equal(before))

	// A store that lost the tree (GC) clones again.
	store.GCGracePeriod = 0
	_, err = store.GC(nil)
	g.Expect(err).NotTo(HaveOccurred())
	again, err = f.Fetch(ctx, url, rev, nil, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(a), "same content, same digest")
	g.Expect(f.Clones()).To(Equal(int64(2)))

	entries, err := os.ReadDir(filepath.Join(store.Root(), "tmp"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty(), "clones are cleaned up")
}

func TestFetchRevisionKinds(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	c1 := srv.Commit(t, "app", "main", map[string]string{"v": "1"}, "1")
	srv.Tag(t, "app", "v1.0.0", c1)
	srv.LightweightTag(t, "app", "light", c1)
	c2 := srv.Commit(t, "app", "main", map[string]string{"v": "2"}, "2")
	c3 := srv.Commit(t, "app", "main", map[string]string{"v": "3"}, "3")

	for name, tc := range map[string]struct {
		ref    Ref
		want   string
		clones int64
	}{
		"annotated tag":            {Ref{Tag: "v1.0.0"}, "1", 1},
		"lightweight tag":          {Ref{Tag: "light"}, "1", 1},
		"semver":                   {Ref{SemVer: "1.x"}, "1", 1},
		"HEAD":                     {Ref{}, "3", 1},
		"commit pin":               {Ref{Commit: c2}, "2", 1},
		"commit pin on branch":     {Ref{Branch: "main", Commit: c2}, "2", 2}, // shallow misses, full clone
		"commit pin on branch tip": {Ref{Branch: "main", Commit: c3}, "3", 1},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			rev, err := NewResolver().Resolve(ctx, url, tc.ref, nil, time.Minute)
			g.Expect(err).NotTo(HaveOccurred())
			f := NewFetcher()
			a, err := f.Fetch(ctx, url, rev, nil, newTestStore(t))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(readFile(t, a, "v")).To(Equal(tc.want))
			g.Expect(f.Clones()).To(Equal(tc.clones))
		})
	}

	t.Run("parsed revision", func(t *testing.T) {
		g := NewWithT(t)
		rev, err := ParseRevision("main@sha1:" + c2)
		g.Expect(err).NotTo(HaveOccurred())
		a, err := NewFetcher().Fetch(ctx, url, rev, nil, newTestStore(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(readFile(t, a, "v")).To(Equal("2"))
	})
}

// A listing cached by the Resolver can be older than the branch: the
// fetch must still deliver the commit that was resolved, not the tip.
func TestFetchAfterTheBranchMoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	srv.Commit(t, "app", "main", map[string]string{"v": "1"}, "1")
	rev, err := NewResolver().Resolve(ctx, url, Ref{Branch: "main"}, nil, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	srv.Commit(t, "app", "main", map[string]string{"v": "2"}, "2")

	f := NewFetcher()
	a, err := f.Fetch(ctx, url, rev, nil, newTestStore(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(t, a, "v")).To(Equal("1"))
	g.Expect(f.Clones()).To(Equal(int64(2)), "shallow clone found the new tip, full clone the commit")

	// The branch deleted since resolution: the commit is gone too.
	srv.Commit(t, "gone", "main", map[string]string{"v": "1"}, "1")
	rev, err = NewResolver().Resolve(ctx, srv.URL("gone"), Ref{}, nil, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	srv.Commit(t, "gone", "other", map[string]string{"v": "x"}, "x")
	srv.SetHEAD(t, "gone", "other")
	srv.DeleteBranch(t, "gone", "main")
	_, err = f.Fetch(ctx, srv.URL("gone"), rev, nil, newTestStore(t))
	var nf *source.NotFoundError
	g.Expect(errors.As(err, &nf)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("commit " + rev.Commit + " not found in " + srv.URL("gone")))
}

func TestFetchErrors(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t, testenv.WithBasicAuth("alice", "s3cret-pw"))
	url := srv.URL("app")
	c := srv.Commit(t, "app", "main", map[string]string{"v": "1"}, "1")
	rev := Revision{Name: "main", Ref: "refs/heads/main", Commit: c}

	t.Run("wrong password", func(t *testing.T) {
		g := NewWithT(t)
		bad, _ := NewAuth(url, map[string][]byte{"username": []byte("alice"), "password": []byte("guess-pw")})
		_, err := NewFetcher().Fetch(ctx, url, rev, bad, newTestStore(t))
		var ae *source.AuthError
		g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).NotTo(ContainSubstring("guess-pw"))
	})

	t.Run("unknown commit", func(t *testing.T) {
		g := NewWithT(t)
		auth, _ := NewAuth(url, srv.SecretData())
		missing := Revision{Commit: "0123456789abcdef0123456789abcdef01234567"}
		_, err := NewFetcher().Fetch(ctx, url, missing, auth, newTestStore(t))
		var nf *source.NotFoundError
		g.Expect(errors.As(err, &nf)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("commit 0123456789abcdef0123456789abcdef01234567 not found"))
	})

	t.Run("cached trees are not shared across credentials", func(t *testing.T) {
		g := NewWithT(t)
		store := newTestStore(t)
		auth, _ := NewAuth(url, srv.SecretData())
		f := NewFetcher()
		_, err := f.Fetch(ctx, url, rev, auth, store)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = f.Fetch(ctx, url, rev, nil, store)
		var ae *source.AuthError
		g.Expect(errors.As(err, &ae)).To(BeTrue(), "anonymous callers must ask the server, got %v", err)
		g.Expect(IndexKey(url, c, auth)).NotTo(Equal(IndexKey(url, c, nil)))
		g.Expect(IndexKey("http://alice:s3cret-pw@h/r.git", c, nil)).NotTo(ContainSubstring("s3cret-pw"))
	})

	t.Run("server errors are transient", func(t *testing.T) {
		g := NewWithT(t)
		auth, _ := NewAuth(url, srv.SecretData())
		srv.FailRequests(502)
		defer srv.FailRequests(0)
		_, err := NewFetcher().Fetch(ctx, url, rev, auth, newTestStore(t))
		var te *source.TransientError
		g.Expect(errors.As(err, &te)).To(BeTrue(), "got %v", err)
	})
}

func TestFetchOverSSH(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t, testenv.WithSSH())
	url := srv.SSHURL("app")
	srv.Commit(t, "app", "main", map[string]string{"Pulumi.yaml": "name: ssh"}, "1")
	auth, err := NewAuth(url, srv.SSHSecretData())
	g.Expect(err).NotTo(HaveOccurred())
	rev, err := NewResolver().Resolve(ctx, url, Ref{}, auth, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	a, err := NewFetcher().Fetch(ctx, url, rev, auth, newTestStore(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(t, a, "Pulumi.yaml")).To(Equal("name: ssh"))
}
