// Package gitserver is a small Git server: it serves the bare repositories
// under a directory over Git's smart HTTP protocol (fetch, shallow fetch and
// push) on 127.0.0.1, built on go-git's protocol packages with no git binary,
// and writes commits, tags and branches into those repositories directly.
//
// The demo serves its sample program from it, so that `git clone` and
// `git push` work against it; the tests use it through internal/testenv. It
// has no authentication of its own: wrap Handler for that.
package gitserver

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Server serves the repositories <Root>/<name>.git as <URL>/<name>.git.
type Server struct {
	root string
	// mu serialises writes to repositories (Commit, Tag, pushes...).
	mu sync.Mutex

	ln  net.Listener
	hs  *http.Server
	url string
}

// New returns a server for the repositories under root, creating root.
func New(root string) (*Server, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	return &Server{root: abs}, nil
}

// Root is the directory of the repositories.
func (s *Server) Root() string { return s.root }

// Start listens on a free port of 127.0.0.1 (never on all interfaces) and
// serves handler, which is the server itself when nil (pass a wrapped
// server to add authentication or counting).
func (s *Server) Start(handler http.Handler) error {
	return s.StartAt("127.0.0.1:0", handler)
}

// StartAt is Start on addr, a port of 127.0.0.1 ("127.0.0.1:0" for any free
// one): what serves a kept set of repositories again at the address its
// clients recorded.
func (s *Server) StartAt(addr string, handler http.Handler) error {
	if handler == nil {
		handler = s
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		return fmt.Errorf("gitserver: listen on %q: want 127.0.0.1:<port>", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gitserver: listen: %w", err)
	}
	s.ln, s.url = ln, "http://"+ln.Addr().String()
	s.hs = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.hs.Serve(ln) }()
	return nil
}

// URL is the address of the server, http://127.0.0.1:<port>; RepoURL that of
// one repository.
func (s *Server) URL() string { return s.url }

// RepoURL is the clone address of repo: <URL>/<repo>.git.
func (s *Server) RepoURL(repo string) string { return s.url + "/" + repo + ".git" }

// Close stops serving, waiting up to 5s for requests in flight.
func (s *Server) Close() error {
	if s.hs == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.hs.Shutdown(ctx)
}

// services are the two smart HTTP services: fetch and push.
const (
	uploadPack  = "git-upload-pack"
	receivePack = "git-receive-pack"
)

// ServeHTTP answers the three requests of smart HTTP:
//
//	GET  /<repo>.git/info/refs?service=git-upload-pack|git-receive-pack
//	POST /<repo>.git/git-upload-pack
//	POST /<repo>.git/git-receive-pack
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	repo, service, advertise, ok := route(r)
	if !ok {
		http.Error(w, "not a smart HTTP Git request (only smart HTTP is served)", http.StatusNotFound)
		return
	}
	dir, err := s.repoDir(repo)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	st, err := openStorage(dir)
	if err != nil {
		http.Error(w, "repository not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	if advertise {
		w.Header().Set("Content-Type", "application/x-"+service+"-advertisement")
		if err := advertiseRefs(w, st, service); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
		return
	}
	body, err := requestBody(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/x-"+service+"-result")
	switch service {
	case uploadPack:
		err = servePack(r.Context(), w, st, body)
	case receivePack:
		s.mu.Lock()
		err = receive(r.Context(), w, st, body)
		s.mu.Unlock()
	}
	var bad *badRequestError
	if errors.As(err, &bad) {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
	// Other errors arrive after the response started: the client sees a
	// truncated pack or a failed report-status.
}

// route parses a smart HTTP request.
func route(r *http.Request) (repo, service string, advertise, ok bool) {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(p, "/info/refs"):
		service = r.URL.Query().Get("service")
		if service != uploadPack && service != receivePack {
			return "", "", false, false
		}
		return strings.TrimSuffix(p, "/info/refs"), service, true, true
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/"+uploadPack):
		return strings.TrimSuffix(p, "/"+uploadPack), uploadPack, false, true
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/"+receivePack):
		return strings.TrimSuffix(p, "/"+receivePack), receivePack, false, true
	}
	return "", "", false, false
}

// repoDir maps a URL path (/<name>.git, or /<name>) to its directory,
// refusing names that would leave the root.
func (s *Server) repoDir(urlPath string) (string, error) {
	name := strings.TrimSuffix(strings.TrimPrefix(urlPath, "/"), ".git")
	return s.dir(name)
}

// dir is where repository name lives.
func (s *Server) dir(name string) (string, error) {
	clean := path.Clean(name)
	if name == "" || clean != name || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(name, "\\") {
		return "", fmt.Errorf("gitserver: bad repository name %q", name)
	}
	return filepath.Join(s.root, filepath.FromSlash(name)+".git"), nil
}

// requestBody undoes the gzip the git CLI applies to large requests.
func requestBody(r *http.Request) (io.ReadCloser, error) {
	if r.Header.Get("Content-Encoding") != "gzip" {
		return r.Body, nil
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return nil, fmt.Errorf("gitserver: gzip request body: %w", err)
	}
	return zr, nil
}

// badRequestError is a request the server could not parse.
type badRequestError struct{ err error }

func (e *badRequestError) Error() string { return "gitserver: bad request: " + e.err.Error() }
func (e *badRequestError) Unwrap() error { return e.err }
