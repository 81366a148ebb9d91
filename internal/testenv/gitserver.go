package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/fluxcd/pkg/gittestserver"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/stackpilot/stackpilot/internal/gitserver"
)

// GitServer is a real Git server for tests: internal/gitserver (smart
// HTTP on 127.0.0.1) with authentication, fault injection and request
// counting in front, and optionally SSH (Flux's gittestserver, which runs
// the real git-upload-pack) over the same repositories.
//
// Commit, Tag and Delete write to the repositories on disk directly rather
// than pushing over the network, so Requests (and RefListings and
// PackFetches) count only what the code under test did.
type GitServer struct {
	srv *gitserver.Server
	ssh *gittestserver.GitServer
	cfg gitServerConfig

	requests   atomic.Int64
	failStatus atomic.Int32

	// refListings counts GET .../info/refs, packFetches POST
	// .../git-upload-pack; see RefListings and PackFetches.
	refListings atomic.Int64
	packFetches atomic.Int64

	// sshIdentity is the client key the SSH server accepts (OpenSSH PEM);
	// knownHosts the known_hosts line for the server's host key.
	sshKey      ed25519.PrivateKey
	sshIdentity []byte
	knownHosts  []byte
}

type gitServerConfig struct {
	user, password string
	token          string
	ssh            bool
	root, addr     string
}

// GitServerOption configures NewGitServer.
type GitServerOption func(*gitServerConfig)

// WithBasicAuth makes the HTTP server require these credentials. It may be
// combined with WithBearerToken; either is then accepted.
func WithBasicAuth(user, password string) GitServerOption {
	return func(c *gitServerConfig) { c.user, c.password = user, password }
}

// WithBearerToken makes the HTTP server require "Authorization: Bearer
// <token>" (or basic auth, when WithBasicAuth is also given).
func WithBearerToken(token string) GitServerOption {
	return func(c *gitServerConfig) { c.token = token }
}

// WithSSH also serves the repositories over SSH on 127.0.0.1. The server
// accepts only the key from SSHIdentity, and presents the host key in
// KnownHosts.
func WithSSH() GitServerOption {
	return func(c *gitServerConfig) { c.ssh = true }
}

// WithRoot keeps the repositories in dir instead of the test's temporary
// directory: they outlive the server, and a server given the same dir later
// serves them again.
func WithRoot(dir string) GitServerOption {
	return func(c *gitServerConfig) { c.root = dir }
}

// WithAddress serves HTTP on addr (127.0.0.1:<port>) instead of a free port:
// the address a kept set of repositories was cloned from.
func WithAddress(addr string) GitServerOption {
	return func(c *gitServerConfig) { c.addr = addr }
}

// NewGitServer starts a Git server that lives as long as the test.
func NewGitServer(t TB, opts ...GitServerOption) *GitServer {
	t.Helper()
	s := &GitServer{}
	for _, o := range opts {
		o(&s.cfg)
	}
	root, addr := s.cfg.root, s.cfg.addr
	if root == "" {
		root = filepath.Join(t.TempDir(), "repos")
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	srv, err := gitserver.New(root)
	if err != nil {
		t.Fatalf("git server: %v", err)
	}
	s.srv = srv
	if err := srv.StartAt(addr, s.middleware(srv)); err != nil {
		t.Fatalf("git server: start HTTP: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if s.cfg.ssh {
		s.startSSH(t)
	}
	return s
}

// middleware counts every request (and ref listings and pack fetches), then
// applies fault injection and authentication, before the Git server serves it.
func (s *GitServer) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs"):
			s.refListings.Add(1)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			s.packFetches.Add(1)
		}
		if code := int(s.failStatus.Load()); code != 0 {
			http.Error(w, http.StatusText(code), code)
			return
		}
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="stackpilot-test"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *GitServer) authorized(r *http.Request) bool {
	if s.cfg.user == "" && s.cfg.token == "" {
		return true
	}
	if s.cfg.token != "" && r.Header.Get("Authorization") == "Bearer "+s.cfg.token {
		return true
	}
	user, pass, ok := r.BasicAuth()
	return ok && s.cfg.user != "" && user == s.cfg.user && pass == s.cfg.password
}

// URL returns the HTTP address of repo: http://127.0.0.1:<port>/<repo>.git.
func (s *GitServer) URL(repo string) string {
	return s.srv.RepoURL(repo)
}

// SSHURL returns the SSH address of repo: ssh://git@127.0.0.1:<port>/<repo>.git.
// It is empty unless the server was started WithSSH.
func (s *GitServer) SSHURL(repo string) string {
	if !s.cfg.ssh {
		return ""
	}
	return s.ssh.SSHAddress() + "/" + repo + ".git"
}

// Requests returns the number of HTTP requests served so far, including
// refused ones. An ls-remote is one request; a clone is two.
func (s *GitServer) Requests() int64 { return s.requests.Load() }

// RefListings returns the number of ref listings (GET .../info/refs) served
// so far, refused ones included: all an ls-remote is over smart HTTP, and
// the first request of a clone or fetch.
func (s *GitServer) RefListings() int64 { return s.refListings.Load() }

// PackFetches returns the number of pack fetches (POST .../git-upload-pack)
// served so far, refused ones included: the second request of a clone or
// fetch. Ref listings minus pack fetches is the number of ls-remotes.
func (s *GitServer) PackFetches() int64 { return s.packFetches.Load() }

// FailRequests makes every HTTP request fail with the given status (say
// 503) until called again with 0.
func (s *GitServer) FailRequests(status int) { s.failStatus.Store(int32(status)) }

// SecretData returns Secret data that authenticates over HTTP, as a user
// would write it: username/password when WithBasicAuth was given,
// otherwise bearerToken when WithBearerToken was, otherwise nil.
func (s *GitServer) SecretData() map[string][]byte {
	switch {
	case s.cfg.user != "":
		return map[string][]byte{"username": []byte(s.cfg.user), "password": []byte(s.cfg.password)}
	case s.cfg.token != "":
		return map[string][]byte{"bearerToken": []byte(s.cfg.token)}
	}
	return nil
}

// Commit adds a commit to branch of repo whose tree is exactly files (path
// -> content, "/"-separated paths, mode 0644) and returns its hash. The
// repository is created on first use, with HEAD pointing at branch; a new
// branch starts from no parent. To delete a file, leave it out of files:
// each commit states the whole tree, so absent files are removed.
func (s *GitServer) Commit(t TB, repo, branch string, files map[string]string, message string) string {
	t.Helper()
	hash, err := s.srv.Commit(repo, branch, files, message)
	if err != nil {
		t.Fatalf("git server: %v", err)
	}
	return hash
}

// Tag creates (or moves) the annotated tag in repo pointing at commit.
// Annotated tags are what releases use, and they exercise peeling.
func (s *GitServer) Tag(t TB, repo, tag, commit string) {
	t.Helper()
	if err := s.srv.Tag(repo, tag, commit); err != nil {
		t.Fatalf("git server: tag %s: %v", tag, err)
	}
}

// LightweightTag creates (or moves) a tag that points at commit directly.
func (s *GitServer) LightweightTag(t TB, repo, tag, commit string) {
	t.Helper()
	if err := s.srv.LightweightTag(repo, tag, commit); err != nil {
		t.Fatalf("git server: tag %s: %v", tag, err)
	}
}

// SetHEAD points repo's HEAD (its default branch) at branch.
func (s *GitServer) SetHEAD(t TB, repo, branch string) {
	t.Helper()
	if err := s.srv.SetHEAD(repo, branch); err != nil {
		t.Fatalf("git server: set HEAD: %v", err)
	}
}

// DeleteBranch removes branch from repo; its commits become unreachable
// unless another reference leads to them.
func (s *GitServer) DeleteBranch(t TB, repo, branch string) {
	t.Helper()
	if err := s.srv.DeleteBranch(repo, branch); err != nil {
		t.Fatalf("git server: delete branch %s: %v", branch, err)
	}
}

// Delete removes repo from the server; requests for it then get 404.
func (s *GitServer) Delete(t TB, repo string) {
	t.Helper()
	if err := s.srv.Delete(repo); err != nil {
		t.Fatalf("git server: delete %q: %v", repo, err)
	}
}

// startSSH serves the repositories over SSH with a fresh host key and a
// fresh client key that is the only one accepted.
func (s *GitServer) startSSH(t TB) {
	t.Helper()
	_, hostKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("git server: %v", err)
	}
	clientPub, clientKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("git server: %v", err)
	}
	s.sshKey = clientKey
	s.sshIdentity = marshalSSHKey(t, clientKey, "")
	authorized, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatalf("git server: %v", err)
	}

	// gitkit loads its host key from <KeyDir>/gitkit.rsa (any type
	// ssh.ParsePrivateKey reads), generating an RSA key if absent.
	keyDir := filepath.Join(filepath.Dir(s.srv.Root()), "ssh")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatalf("git server: %v", err)
	}
	if err := os.WriteFile(filepath.Join(keyDir, "gitkit.rsa"), marshalSSHKey(t, hostKey, ""), 0o600); err != nil {
		t.Fatalf("git server: %v", err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) == string(authorized.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, fmt.Errorf("unknown public key")
		},
		// gitkit turns on NoClientAuth when its own auth is off; this
		// callback refuses the "none" method so the key is required.
		NoClientAuthCallback: func(ssh.ConnMetadata) (*ssh.Permissions, error) {
			return nil, fmt.Errorf("public key required")
		},
	}
	s.ssh = gittestserver.NewGitServer(s.srv.Root())
	s.ssh.WithSSHConfig(cfg).KeyDir(keyDir)
	if err := s.ssh.ListenSSH(); err != nil {
		t.Fatalf("git server: listen SSH: %v", err)
	}
	go func() { _ = s.ssh.StartSSH() }()
	t.Cleanup(func() { _ = s.ssh.StopSSH() })

	hostPub, err := ssh.NewPublicKey(hostKey.Public())
	if err != nil {
		t.Fatalf("git server: %v", err)
	}
	addr := strings.TrimPrefix(s.ssh.SSHAddress(), "ssh://git@")
	s.knownHosts = []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostPub) + "\n")
}

func marshalSSHKey(t TB, key ed25519.PrivateKey, passphrase string) []byte {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(key, "stackpilot-test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(key, "stackpilot-test", []byte(passphrase))
	}
	if err != nil {
		t.Fatalf("git server: marshal key: %v", err)
	}
	return pem.EncodeToMemory(block)
}

// KnownHosts returns a known_hosts line for the SSH server's host key.
func (s *GitServer) KnownHosts() []byte { return s.knownHosts }

// SSHIdentity returns the private key (OpenSSH PEM) the SSH server accepts.
func (s *GitServer) SSHIdentity() []byte { return s.sshIdentity }

// SSHIdentityWithPassphrase returns the same accepted key, encrypted with
// passphrase, for testing password-protected identities.
func (s *GitServer) SSHIdentityWithPassphrase(t TB, passphrase string) []byte {
	t.Helper()
	return marshalSSHKey(t, s.sshKey, passphrase)
}

// SSHSecretData returns Secret data for the SSH server: identity and
// known_hosts.
func (s *GitServer) SSHSecretData() map[string][]byte {
	return map[string][]byte{"identity": s.sshIdentity, "known_hosts": s.knownHosts}
}

// SetRef points the full reference ref of repo (refs/pull/1/head) at
// commit, as forges keep each pull request's head in the base repository.
func (s *GitServer) SetRef(t TB, repo, ref, commit string) {
	t.Helper()
	if err := s.srv.SetRef(repo, ref, commit); err != nil {
		t.Fatalf("git server: set %s: %v", ref, err)
	}
}
