package testenv

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func lsRemote(url string, auth transport.AuthMethod) (map[string]string, error) {
	remote := gogit.NewRemote(nil, &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := remote.ListContext(context.Background(), &gogit.ListOptions{Auth: auth, PeelingOption: gogit.AppendPeeled})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range refs {
		if r.Type() == plumbing.SymbolicReference {
			out[r.Name().String()] = r.Target().String()
			continue
		}
		out[r.Name().String()] = r.Hash().String()
	}
	return out, nil
}

func TestGitServerServesCommitsAndTags(t *testing.T) {
	g := NewWithT(t)
	srv := NewGitServer(t)
	g.Expect(srv.URL("app")).To(MatchRegexp(`^http://127\.0\.0\.1:\d+/app\.git$`))

	c1 := srv.Commit(t, "app", "main", map[string]string{"Pulumi.yaml": "name: app", "dir/a.txt": "a", "dir/sub/b.txt": "b"}, "first")
	c2 := srv.Commit(t, "app", "main", map[string]string{"Pulumi.yaml": "name: app v2"}, "second")
	c3 := srv.Commit(t, "app", "feature", map[string]string{"f.txt": "f"}, "feature")
	srv.Tag(t, "app", "v1.0.0", c1)
	srv.LightweightTag(t, "app", "light", c2)

	before, listings, fetches := srv.Requests(), srv.RefListings(), srv.PackFetches()
	refs, err := lsRemote(srv.URL("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.Requests()-before).To(Equal(int64(1)), "an ls-remote is one request")
	g.Expect(srv.RefListings()-listings).To(Equal(int64(1)), "an ls-remote is a ref listing")
	g.Expect(srv.PackFetches()-fetches).To(Equal(int64(0)), "an ls-remote fetches no pack")
	g.Expect(refs).To(HaveKeyWithValue("HEAD", "refs/heads/main"))
	g.Expect(refs).To(HaveKeyWithValue("refs/heads/main", c2))
	g.Expect(refs).To(HaveKeyWithValue("refs/heads/feature", c3))
	g.Expect(refs).To(HaveKeyWithValue("refs/tags/v1.0.0^{}", c1))
	g.Expect(refs["refs/tags/v1.0.0"]).NotTo(Equal(c1), "annotated tags point at a tag object")
	g.Expect(refs).To(HaveKeyWithValue("refs/tags/light", c2))

	// A clone sees exactly the files of the last commit.
	dir := t.TempDir()
	before, listings, fetches = srv.Requests(), srv.RefListings(), srv.PackFetches()
	r, err := gogit.PlainClone(dir, false, &gogit.CloneOptions{URL: srv.URL("app"), Depth: 1})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.Requests()-before).To(Equal(int64(2)), "a clone is two requests")
	g.Expect(srv.RefListings()-listings).To(Equal(int64(1)), "a clone lists the refs once")
	g.Expect(srv.PackFetches()-fetches).To(Equal(int64(1)), "a clone fetches one pack")
	head, err := r.Head()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head.Hash().String()).To(Equal(c2))
	b, err := os.ReadFile(filepath.Join(dir, "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal("name: app v2"))
	g.Expect(filepath.Join(dir, "dir")).NotTo(BeADirectory(), "files left out are deleted")

	srv.SetHEAD(t, "app", "feature")
	refs, err = lsRemote(srv.URL("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refs).To(HaveKeyWithValue("HEAD", "refs/heads/feature"))

	srv.Delete(t, "app")
	_, err = lsRemote(srv.URL("app"), nil)
	g.Expect(errors.Is(err, transport.ErrRepositoryNotFound)).To(BeTrue(), "got %v", err)

	srv.Commit(t, "app2", "main", map[string]string{"x": "x"}, "x")
	srv.FailRequests(503)
	_, err = lsRemote(srv.URL("app2"), nil)
	g.Expect(err).To(MatchError(ContainSubstring("503")))
	srv.FailRequests(0)
	_, err = lsRemote(srv.URL("app2"), nil)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestGitServerHTTPAuth(t *testing.T) {
	g := NewWithT(t)
	srv := NewGitServer(t, WithBasicAuth("alice", "s3cret"), WithBearerToken("tok3n"))
	srv.Commit(t, "private", "main", map[string]string{"a": "a"}, "a")

	_, err := lsRemote(srv.URL("private"), nil)
	g.Expect(errors.Is(err, transport.ErrAuthenticationRequired)).To(BeTrue(), "got %v", err)
	_, err = lsRemote(srv.URL("private"), &githttp.BasicAuth{Username: "alice", Password: "wrong"})
	g.Expect(errors.Is(err, transport.ErrAuthenticationRequired)).To(BeTrue(), "got %v", err)
	_, err = lsRemote(srv.URL("private"), &githttp.BasicAuth{Username: "alice", Password: "s3cret"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = lsRemote(srv.URL("private"), &githttp.TokenAuth{Token: "tok3n"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.SecretData()).To(HaveKeyWithValue("password", []byte("s3cret")))
}

func TestGitServerSSH(t *testing.T) {
	g := NewWithT(t)
	srv := NewGitServer(t, WithSSH())
	c := srv.Commit(t, "app", "main", map[string]string{"a": "a"}, "a")
	g.Expect(srv.SSHURL("app")).To(MatchRegexp(`^ssh://git@127\.0\.0\.1:\d+/app\.git$`))

	hostKeyCallback := func(known []byte) ssh.HostKeyCallback {
		f := filepath.Join(t.TempDir(), "known_hosts")
		g.Expect(os.WriteFile(f, known, 0o600)).To(Succeed())
		cb, err := knownhosts.New(f)
		g.Expect(err).NotTo(HaveOccurred())
		return cb
	}
	auth, err := gitssh.NewPublicKeys("git", srv.SSHIdentity(), "")
	g.Expect(err).NotTo(HaveOccurred())
	auth.HostKeyCallback = hostKeyCallback(srv.KnownHosts())
	refs, err := lsRemote(srv.SSHURL("app"), auth)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refs).To(HaveKeyWithValue("refs/heads/main", c))

	encrypted := srv.SSHIdentityWithPassphrase(t, "pass phrase")
	g.Expect(string(encrypted)).NotTo(Equal(string(srv.SSHIdentity())))
	auth, err = gitssh.NewPublicKeys("git", encrypted, "pass phrase")
	g.Expect(err).NotTo(HaveOccurred())
	auth.HostKeyCallback = hostKeyCallback(srv.KnownHosts())
	_, err = lsRemote(srv.SSHURL("app"), auth)
	g.Expect(err).NotTo(HaveOccurred())

	// Another key is refused.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(other)
	g.Expect(err).NotTo(HaveOccurred())
	bad := &gitssh.PublicKeys{User: "git", Signer: signer}
	bad.HostKeyCallback = hostKeyCallback(srv.KnownHosts())
	_, err = lsRemote(srv.SSHURL("app"), bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(strings.Contains(err.Error(), "unable to authenticate")).To(BeTrue(), "got %v", err)
}
