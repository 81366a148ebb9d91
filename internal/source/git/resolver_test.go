package git

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// fakeClock lets tests age the Resolver's cache without sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestResolver() (*Resolver, *fakeClock) {
	clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	r := NewResolver()
	r.now = clock.Now
	return r, clock
}

func TestResolveReferences(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	files := map[string]string{"Pulumi.yaml": "name: app"}
	c1 := srv.Commit(t, "app", "main", files, "1")
	srv.Tag(t, "app", "v1.0.0", c1)
	c2 := srv.Commit(t, "app", "main", files, "2")
	srv.Tag(t, "app", "v1.2.0", c2)
	srv.LightweightTag(t, "app", "1.2.1", c2) // same version family, no "v"
	c3 := srv.Commit(t, "app", "main", files, "3")
	srv.Tag(t, "app", "v2.0.0-rc.1", c3)
	srv.LightweightTag(t, "app", "not-a-version", c3)
	cf := srv.Commit(t, "app", "feature/x", files, "f")

	for name, tc := range map[string]struct {
		ref  Ref
		want Revision
		str  string
	}{
		"HEAD":                 {Ref{}, Revision{Name: "main", Ref: "refs/heads/main", Commit: c3}, "main@sha1:" + c3},
		"branch":               {Ref{Branch: "main"}, Revision{Name: "main", Ref: "refs/heads/main", Commit: c3}, ""},
		"branch with slash":    {Ref{Branch: "feature/x"}, Revision{Name: "feature/x", Ref: "refs/heads/feature/x", Commit: cf}, ""},
		"annotated tag peeled": {Ref{Tag: "v1.0.0"}, Revision{Name: "v1.0.0", Ref: "refs/tags/v1.0.0", Commit: c1}, "v1.0.0@sha1:" + c1},
		"lightweight tag":      {Ref{Tag: "1.2.1"}, Revision{Name: "1.2.1", Ref: "refs/tags/1.2.1", Commit: c2}, ""},
		"semver highest":       {Ref{SemVer: "^1.0"}, Revision{Name: "1.2.1", Ref: "refs/tags/1.2.1", Commit: c2}, ""},
		"semver range":         {Ref{SemVer: ">=1.0.0 <1.2.0"}, Revision{Name: "v1.0.0", Ref: "refs/tags/v1.0.0", Commit: c1}, ""},
		"semver prerelease":    {Ref{SemVer: ">=2.0.0-0"}, Revision{Name: "v2.0.0-rc.1", Ref: "refs/tags/v2.0.0-rc.1", Commit: c3}, ""},
		"commit pin":           {Ref{Commit: c1}, Revision{Commit: c1}, "sha1:" + c1},
		"commit pin on branch": {Ref{Branch: "main", Commit: c1}, Revision{Name: "main", Ref: "refs/heads/main", Commit: c1}, "main@sha1:" + c1},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r, _ := newTestResolver()
			rev, err := r.Resolve(ctx, url, tc.ref, nil, time.Minute)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rev).To(Equal(tc.want))
			if tc.str != "" {
				g.Expect(rev.String()).To(Equal(tc.str))
			}
			parsed, err := ParseRevision(rev.String())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(parsed.Name).To(Equal(rev.Name))
			g.Expect(parsed.Commit).To(Equal(rev.Commit))
		})
	}

	t.Run("a commit pin needs no request", func(t *testing.T) {
		g := NewWithT(t)
		r, _ := newTestResolver()
		before := srv.Requests()
		_, err := r.Resolve(ctx, url, Ref{Commit: c1}, nil, time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Requests()).To(BeZero())
		g.Expect(srv.Requests()).To(Equal(before))
	})

	t.Run("HEAD follows the default branch", func(t *testing.T) {
		g := NewWithT(t)
		srv.SetHEAD(t, "app", "feature/x")
		defer srv.SetHEAD(t, "app", "main")
		r, _ := newTestResolver()
		rev, err := r.Resolve(ctx, url, Ref{}, nil, time.Minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rev).To(Equal(Revision{Name: "feature/x", Ref: "refs/heads/feature/x", Commit: cf}))
	})
}

func TestResolveNotFound(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	srv.Commit(t, "app", "main", map[string]string{"a": "a"}, "1")
	srv.LightweightTag(t, "app", "v0.1.0", srv.Commit(t, "app", "main", map[string]string{"a": "b"}, "2"))

	for name, tc := range map[string]struct {
		ref  Ref
		want string
	}{
		"branch": {Ref{Branch: "nope"}, "branch nope not found in " + url},
		"tag":    {Ref{Tag: "v9"}, "tag v9 not found in " + url},
		"semver": {Ref{SemVer: ">=1.0"}, "tag matching semver >=1.0 not found in " + url},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewResolver().Resolve(ctx, url, tc.ref, nil, time.Minute)
			var nf *source.NotFoundError
			g.Expect(errors.As(err, &nf)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(Equal(tc.want))
		})
	}

	t.Run("deleted repository", func(t *testing.T) {
		g := NewWithT(t)
		srv.Commit(t, "gone", "main", map[string]string{"a": "a"}, "1")
		srv.Delete(t, "gone")
		_, err := NewResolver().Resolve(ctx, srv.URL("gone"), Ref{Branch: "main"}, nil, time.Minute)
		var nf *source.NotFoundError
		g.Expect(errors.As(err, &nf)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("repository " + srv.URL("gone") + " not found"))
	})

	t.Run("HEAD pointing at no branch", func(t *testing.T) {
		g := NewWithT(t)
		srv.SetHEAD(t, "app", "missing")
		defer srv.SetHEAD(t, "app", "main")
		_, err := NewResolver().Resolve(ctx, url, Ref{}, nil, time.Minute)
		var nf *source.NotFoundError
		g.Expect(errors.As(err, &nf)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("HEAD not found"))
	})

	t.Run("invalid specs stall", func(t *testing.T) {
		g := NewWithT(t)
		for _, ref := range []Ref{{SemVer: "not a constraint!"}, {Commit: "abc123"}} {
			_, err := NewResolver().Resolve(ctx, url, ref, nil, time.Minute)
			var ie *source.InvalidSpecError
			g.Expect(errors.As(err, &ie)).To(BeTrue(), "got %v", err)
			g.Expect(source.IsStalling(err)).To(BeTrue())
		}
	})
}

func TestResolveIsSharedAndCached(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	c1 := srv.Commit(t, "app", "main", map[string]string{"a": "1"}, "1")
	r, clock := newTestResolver()
	const maxAge = 5 * time.Minute

	resolveMany := func(n int, ref Ref) []Revision {
		var wg sync.WaitGroup
		revs := make([]Revision, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				revs[i], errs[i] = r.Resolve(ctx, url, ref, nil, maxAge)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			g.Expect(err).NotTo(HaveOccurred())
		}
		return revs
	}

	before := srv.Requests()
	for _, rev := range resolveMany(100, Ref{Branch: "main"}) {
		g.Expect(rev.Commit).To(Equal(c1))
	}
	g.Expect(r.Requests()).To(Equal(int64(1)), "100 concurrent resolutions, one ls-remote")
	g.Expect(srv.Requests() - before).To(Equal(int64(1)))

	// Other references of the same repository come from the same listing.
	resolveMany(10, Ref{})
	g.Expect(r.Requests()).To(Equal(int64(1)))

	// A new commit is not seen until the listing is older than maxAge...
	c2 := srv.Commit(t, "app", "main", map[string]string{"a": "2"}, "2")
	clock.Add(maxAge - time.Second)
	for _, rev := range resolveMany(10, Ref{Branch: "main"}) {
		g.Expect(rev.Commit).To(Equal(c1))
	}
	g.Expect(r.Requests()).To(Equal(int64(1)))

	// ...then one request refreshes it for everybody.
	clock.Add(time.Second)
	for _, rev := range resolveMany(100, Ref{Branch: "main"}) {
		g.Expect(rev.Commit).To(Equal(c2))
	}
	g.Expect(r.Requests()).To(Equal(int64(2)))
	g.Expect(srv.Requests() - before).To(Equal(int64(2)))

	// Force and Forget go to the server.
	c3 := srv.Commit(t, "app", "main", map[string]string{"a": "3"}, "3")
	rev, err := r.Resolve(ctx, url, Ref{Branch: "main"}, nil, maxAge, Force())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev.Commit).To(Equal(c3))
	g.Expect(r.Requests()).To(Equal(int64(3)))
	r.Forget(CacheKey(url, nil))
	_, err = r.Resolve(ctx, url, Ref{Branch: "main"}, nil, maxAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Requests()).To(Equal(int64(4)))
	_, err = r.Resolve(ctx, url, Ref{Branch: "main"}, nil, maxAge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Requests()).To(Equal(int64(4)))
}

func TestResolveKeysOnCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t, testenv.WithBasicAuth("alice", "correct-horse"))
	url := srv.URL("private")
	c := srv.Commit(t, "private", "main", map[string]string{"a": "a"}, "1")
	r, _ := newTestResolver()

	good, err := NewAuth(url, srv.SecretData())
	g.Expect(err).NotTo(HaveOccurred())
	rev, err := r.Resolve(ctx, url, Ref{Branch: "main"}, good, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev.Commit).To(Equal(c))

	// A cached answer obtained with alice's Secret is not given to a
	// caller without credentials, or with other ones.
	_, err = r.Resolve(ctx, url, Ref{Branch: "main"}, nil, time.Hour)
	var ae *source.AuthError
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
	g.Expect(ae.InvalidSecret()).To(BeFalse(), "refused by the server, not a malformed Secret")

	bad, err := NewAuth(url, map[string][]byte{"username": []byte("alice"), "password": []byte("wrong-battery-staple")})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = r.Resolve(ctx, url, Ref{Branch: "main"}, bad, time.Hour)
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("authentication to " + url + " failed"))
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong-battery-staple"))
	g.Expect(err.Error()).NotTo(ContainSubstring("correct-horse"))
	g.Expect(r.Requests()).To(Equal(int64(3)))

	// Credentials in the URL never reach a message.
	withUserinfo := "http://alice:wrong-battery-staple@" + url[len("http://"):]
	_, err = NewResolver().Resolve(ctx, withUserinfo, Ref{Branch: "main"}, nil, time.Hour)
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong-battery-staple"))
}

func TestResolveBearerToken(t *testing.T) {
	g := NewWithT(t)
	srv := testenv.NewGitServer(t, testenv.WithBearerToken("t0ken"))
	c := srv.Commit(t, "app", "main", map[string]string{"a": "a"}, "1")
	auth, err := NewAuth(srv.URL("app"), srv.SecretData())
	g.Expect(err).NotTo(HaveOccurred())
	rev, err := NewResolver().Resolve(context.Background(), srv.URL("app"), Ref{}, auth, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev.Commit).To(Equal(c))
}

func TestResolveTransientErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	srv.Commit(t, "app", "main", map[string]string{"a": "a"}, "1")

	srv.FailRequests(503)
	_, err := NewResolver().Resolve(ctx, srv.URL("app"), Ref{Branch: "main"}, nil, time.Hour)
	var te *source.TransientError
	g.Expect(errors.As(err, &te)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("503"))
	g.Expect(source.IsStalling(err)).To(BeFalse())
	srv.FailRequests(0)

	// Nothing listens on port 1: the connection is refused.
	_, err = NewResolver().Resolve(ctx, "http://127.0.0.1:1/app.git", Ref{Branch: "main"}, nil, time.Hour)
	g.Expect(errors.As(err, &te)).To(BeTrue(), "got %v", err)
}

func TestResolveOverSSH(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t, testenv.WithSSH())
	c := srv.Commit(t, "app", "main", map[string]string{"a": "a"}, "1")
	url := srv.SSHURL("app")

	auth, err := NewAuth(url, srv.SSHSecretData())
	g.Expect(err).NotTo(HaveOccurred())
	rev, err := NewResolver().Resolve(ctx, url, Ref{Branch: "main"}, auth, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev.Commit).To(Equal(c))

	encrypted, err := NewAuth(url, map[string][]byte{
		"identity":    srv.SSHIdentityWithPassphrase(t, "open sesame"),
		"password":    []byte("open sesame"),
		"known_hosts": srv.KnownHosts(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = NewResolver().Resolve(ctx, url, Ref{}, encrypted, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())

	// A key the server does not know, and a host key that is not the
	// server's, are AuthErrors; the latter blames known_hosts.
	other := testenv.NewGitServer(t, testenv.WithSSH())
	wrongKey, err := NewAuth(url, map[string][]byte{"identity": other.SSHIdentity(), "known_hosts": srv.KnownHosts()})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = NewResolver().Resolve(ctx, url, Ref{}, wrongKey, time.Hour)
	var ae *source.AuthError
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("SSH key was refused"))

	// Our server's address with the other server's key.
	otherHostKey := withHost(other.KnownHosts(), hostOf(srv.KnownHosts()))
	wrongHost, err := NewAuth(url, map[string][]byte{"identity": srv.SSHIdentity(), "known_hosts": otherHostKey})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = NewResolver().Resolve(ctx, url, Ref{}, wrongHost, time.Hour)
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
	g.Expect(ae.Key).To(Equal("known_hosts"))
	g.Expect(err.Error()).To(ContainSubstring("does not match known_hosts"))
}

// hostOf returns the host pattern of a known_hosts line.
func hostOf(line []byte) string {
	host, _, _ := bytes.Cut(line, []byte(" "))
	return string(host)
}

// withHost returns the known_hosts line with its host pattern replaced.
func withHost(line []byte, host string) []byte {
	_, key, _ := bytes.Cut(line, []byte(" "))
	return append([]byte(host+" "), key...)
}

func TestResolverForgetsOldListings(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	srv.Commit(t, "a", "main", map[string]string{"a": "a"}, "1")
	srv.Commit(t, "b", "main", map[string]string{"b": "b"}, "1")
	r, clock := newTestResolver()
	r.Retention = time.Hour

	_, err := r.Resolve(ctx, srv.URL("a"), Ref{}, nil, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	clock.Add(2 * time.Hour)
	_, err = r.Resolve(ctx, srv.URL("b"), Ref{}, nil, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	r.mu.Lock()
	defer r.mu.Unlock()
	g.Expect(r.cache).To(HaveLen(1))
	g.Expect(r.cache).To(HaveKey(CacheKey(srv.URL("b"), nil)))
}
