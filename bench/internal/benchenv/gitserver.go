package benchenv

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// GitServer serves bare repositories over smart HTTP on 127.0.0.1 with Flux's
// gittestserver (the real git-upload-pack), like testenv.GitServer (which needs
// a testing.TB), and counts the requests by kind. Commits are written to disk
// directly, so the counts are only what the controller did.
type GitServer struct {
	srv  *gittestserver.GitServer
	root string
	log  *os.File
	mu   sync.Mutex

	// Ref listings (GET .../info/refs: what ls-remote does, and the first
	// half of a clone), pack fetches (POST .../git-upload-pack: the second
	// half of a clone or fetch), and anything else.
	listings, fetches, others atomic.Int64
}

// GitCounts is a snapshot of a GitServer's request counters.
type GitCounts struct{ Listings, Fetches, Others int64 }

// Total is every request.
func (c GitCounts) Total() int64 { return c.Listings + c.Fetches + c.Others }

// Sub is c - d.
func (c GitCounts) Sub(d GitCounts) GitCounts {
	return GitCounts{c.Listings - d.Listings, c.Fetches - d.Fetches, c.Others - d.Others}
}

func (c GitCounts) String() string {
	return fmt.Sprintf("%d requests: %d ref listings (GET info/refs), %d pack fetches (POST git-upload-pack), %d other",
		c.Total(), c.Listings, c.Fetches, c.Others)
}

// StartGitServer serves root; gitkit's request log goes to logPath.
func StartGitServer(root, logPath string) (*GitServer, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	log.SetOutput(logFile) // gitkit logs each request with the standard logger
	s := &GitServer{srv: gittestserver.NewGitServer(root), root: root, log: logFile}
	s.srv.AddHTTPMiddlewares(s.count)
	if err := s.srv.StartHTTP(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("git server: %w", err)
	}
	return s, nil
}

func (s *GitServer) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs"):
			s.listings.Add(1)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			s.fetches.Add(1)
		default:
			s.others.Add(1)
		}
		next.ServeHTTP(w, r)
	})
}

// Counts returns the requests served so far.
func (s *GitServer) Counts() GitCounts {
	return GitCounts{s.listings.Load(), s.fetches.Load(), s.others.Load()}
}

// URL is the clone address of repo.
func (s *GitServer) URL(repo string) string { return s.srv.HTTPAddress() + "/" + repo + ".git" }

// Stop stops serving.
func (s *GitServer) Stop() {
	s.srv.StopHTTP()
	log.SetOutput(os.Stderr)
	s.log.Close()
}

// Commit adds a commit to branch of repo (created on first use, HEAD at
// branch) whose tree is exactly files, and returns its hash.
func (s *GitServer) Commit(repo, branch string, files map[string]string, message string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.root, repo+".git")
	r, err := gogit.PlainOpen(dir)
	if err != nil {
		r, err = gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{
			Bare:        true,
			InitOptions: gogit.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
		})
		if err != nil {
			return "", fmt.Errorf("git: create %s: %w", repo, err)
		}
	}
	st := r.Storer
	tree, err := writeTree(st, files)
	if err != nil {
		return "", fmt.Errorf("git: write tree: %w", err)
	}
	refName := plumbing.NewBranchReferenceName(branch)
	var parents []plumbing.Hash
	if ref, err := st.Reference(refName); err == nil {
		parents = append(parents, ref.Hash())
	}
	sig := object.Signature{Name: "Stackpilot Bench", Email: "bench@stackpilot.dev", When: time.Now()}
	hash, err := store(st, &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: tree, ParentHashes: parents})
	if err != nil {
		return "", fmt.Errorf("git: write commit: %w", err)
	}
	if err := st.SetReference(plumbing.NewHashReference(refName, hash)); err != nil {
		return "", fmt.Errorf("git: update %s: %w", refName, err)
	}
	return hash.String(), nil
}

// writeTree stores files ("/"-separated paths) and returns the root tree.
func writeTree(st storer.EncodedObjectStorer, files map[string]string) (plumbing.Hash, error) {
	blobs := map[string]string{}
	subdirs := map[string]map[string]string{}
	for p, content := range files {
		dir, rest, nested := strings.Cut(p, "/")
		if !nested {
			blobs[dir] = content
			continue
		}
		if subdirs[dir] == nil {
			subdirs[dir] = map[string]string{}
		}
		subdirs[dir][rest] = content
	}
	var entries []object.TreeEntry
	for name, content := range blobs {
		obj := st.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write([]byte(content)); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
	}
	for name, sub := range subdirs {
		h, err := writeTree(st, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	// Git sorts a directory as if its name ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	return store(st, &object.Tree{Entries: entries})
}

func store(st storer.EncodedObjectStorer, o interface {
	Encode(plumbing.EncodedObject) error
}) (plumbing.Hash, error) {
	obj := st.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(obj)
}
