package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// gitServer serves bare repositories under root over smart HTTP on
// 127.0.0.1 with Flux's gittestserver (git upload-pack and receive-pack
// behind gitkit), so the demo's Git is real Git: it can be cloned and pushed to.
type gitServer struct {
	srv  *gittestserver.GitServer
	root string
	log  *os.File
}

// startGitServer serves root. gitkit logs each request with the standard
// library's logger: that log goes to logPath rather than to the terminal.
func startGitServer(root, logPath string) (*gitServer, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	log.SetOutput(logFile)
	s := &gitServer{srv: gittestserver.NewGitServer(root), root: root, log: logFile}
	// httptest listens on 127.0.0.1:0, never on all interfaces.
	if err := s.srv.StartHTTP(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("git server: %w", err)
	}
	return s, nil
}

// URL is the clone address of repo.
func (s *gitServer) URL(repo string) string {
	return s.srv.HTTPAddress() + "/" + repo + ".git"
}

func (s *gitServer) Stop() {
	s.srv.StopHTTP()
	log.SetOutput(os.Stderr)
	s.log.Close()
}

// Commit writes files (path -> content) on top of the tree of branch of repo
// (a bare repository, created on first use with HEAD at branch), commits, and
// returns the commit's hash. Nothing is checked out on disk.
func (s *gitServer) Commit(repo, branch string, files map[string][]byte, message string) (string, error) {
	dir := filepath.Join(s.root, repo+".git")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if _, err := gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{
			Bare:        true,
			InitOptions: gogit.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
		}); err != nil {
			return "", fmt.Errorf("git: create %s: %w", repo, err)
		}
	}
	// The bare repository's storage with an in-memory worktree: the commit
	// goes to disk, the files never do.
	st := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault())
	r, err := gogit.Open(st, memfs.New())
	if err != nil {
		return "", fmt.Errorf("git: open %s: %w", repo, err)
	}
	head := plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(branch))
	if err := st.SetReference(head); err != nil {
		return "", err
	}
	wt, err := r.Worktree()
	if err != nil {
		return "", err
	}
	if ref, err := r.Reference(plumbing.NewBranchReferenceName(branch), true); err == nil {
		if err := wt.Reset(&gogit.ResetOptions{Commit: ref.Hash(), Mode: gogit.HardReset}); err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := wt.Filesystem.Create(name)
		if err != nil {
			return "", err
		}
		_, werr := f.Write(files[name])
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", werr
		}
		if _, err := wt.Add(name); err != nil {
			return "", fmt.Errorf("git: add %s: %w", name, err)
		}
	}
	sig := &object.Signature{Name: "Stackpilot Demo", Email: "demo@stackpilot.dev", When: time.Now()}
	hash, err := wt.Commit(message, &gogit.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		return "", fmt.Errorf("git: commit: %w", err)
	}
	return hash.String(), nil
}
