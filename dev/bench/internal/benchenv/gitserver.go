package benchenv

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// GitCounts is a snapshot of the Git server's request counters, by kind: ref
// listings (GET .../info/refs: what ls-remote does, and the first half of a
// clone), pack fetches (POST .../git-upload-pack: the second half of a clone
// or fetch), and anything else.
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

// startGitServer starts testenv's Git server for this run, its repositories
// in <Tmp>/git, on addr (any free port when empty), with gitkit's request log
// (the standard logger) going to <Tmp>/git-server.log.
func (e *Env) startGitServer(addr string) error {
	logFile, err := os.OpenFile(filepath.Join(e.Tmp, "git-server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	log.SetOutput(logFile) // gitkit logs each request with the standard logger
	e.defer_(func() {
		log.SetOutput(os.Stderr)
		logFile.Close()
	})
	e.prog = &testenv.Program{}
	e.defer_(e.prog.Close) // stops the server
	opts := []testenv.GitServerOption{testenv.WithRoot(filepath.Join(e.Tmp, "git"))}
	if addr != "" {
		opts = append(opts, testenv.WithAddress(addr))
	}
	return Try(func() { e.Git = testenv.NewGitServer(e.prog, opts...) })
}

// GitCounts returns the Git server's requests so far.
func (e *Env) GitCounts() GitCounts {
	listings, fetches := e.Git.RefListings(), e.Git.PackFetches()
	return GitCounts{listings, fetches, e.Git.Requests() - listings - fetches}
}

// Commit adds a commit to branch of repo (created on first use, HEAD at
// branch) whose tree is exactly files, and returns its hash.
func (e *Env) Commit(repo, branch string, files map[string]string, message string) (hash string, err error) {
	err = Try(func() { hash = e.Git.Commit(e.prog, repo, branch, files, message) })
	return hash, err
}

// Try runs f and returns the *testenv.FatalError it panics with, if any:
// what testenv.Program.Fatalf does in place of failing a test.
func Try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*testenv.FatalError)
			if !ok {
				panic(r)
			}
			err = fe
		}
	}()
	f()
	return nil
}
