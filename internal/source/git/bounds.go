package git

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/go-git/go-billy/v5"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

// Defaults for a Fetcher's bounds (controller flags --artifact-max-size and
// --artifact-max-files), the same as an OCI artifact's.
const (
	DefaultMaxSize  = 100 << 20
	DefaultMaxFiles = artifact.DefaultMaxFiles
)

// LimitError reports a fetch that went past one of the Fetcher's bounds; the
// clone was stopped there and nothing of it was stored.
type LimitError struct {
	URL      string // redacted
	Revision string
	// What is "size of the fetched objects", "size of the checked-out
	// files" or "file count".
	What string
	Max  int64
}

func (e *LimitError) Error() string {
	unit := " bytes"
	if e.What == "file count" {
		unit = " files"
	}
	return fmt.Sprintf("Git repository %s at %s exceeds the %s limit of %d%s", e.URL, e.Revision, e.What, e.Max, unit)
}

// budget is one bound shared by every file of a clone: bytes written, or
// files created. Once spent, it stays spent, so the clone's error can be
// told from whatever go-git made of the failed write.
type budget struct {
	what     string
	max      int64
	used     atomic.Int64
	exceeded atomic.Bool
}

func (b *budget) spend(n int64) error {
	if b == nil {
		return nil
	}
	if b.used.Add(n) > b.max {
		b.exceeded.Store(true)
		return &LimitError{What: b.what, Max: b.max}
	}
	return nil
}

// boundedFS is a billy file system that charges what go-git writes to
// budgets: it is how a clone (the pack as it streams in, the checkout)
// stops at the bound rather than filling the disk. Rewrites are charged
// again and removals give nothing back: the bound is on work done.
type boundedFS struct {
	billy.Filesystem
	bytes *budget
	files *budget // nil: files are not counted (the .git directory)
}

func (fs *boundedFS) Create(name string) (billy.File, error) {
	return fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (fs *boundedFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := fs.files.spend(1); err != nil {
			return nil, err
		}
	}
	f, err := fs.Filesystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &boundedFile{File: f, bytes: fs.bytes}, nil
}

func (fs *boundedFS) TempFile(dir, prefix string) (billy.File, error) {
	if err := fs.files.spend(1); err != nil {
		return nil, err
	}
	f, err := fs.Filesystem.TempFile(dir, prefix)
	if err != nil {
		return nil, err
	}
	return &boundedFile{File: f, bytes: fs.bytes}, nil
}

func (fs *boundedFS) Symlink(target, link string) error {
	if err := fs.files.spend(1); err != nil {
		return err
	}
	return fs.Filesystem.Symlink(target, link)
}

func (fs *boundedFS) Chroot(path string) (billy.Filesystem, error) {
	inner, err := fs.Filesystem.Chroot(path)
	if err != nil {
		return nil, err
	}
	return &boundedFS{Filesystem: inner, bytes: fs.bytes, files: fs.files}, nil
}

// Chmod keeps go-git's read-only pack files read-only (it looks for
// billy.Chmod) and checked-out scripts executable.
func (fs *boundedFS) Chmod(name string, mode os.FileMode) error {
	if c, ok := fs.Filesystem.(billy.Chmod); ok {
		return c.Chmod(name, mode)
	}
	return nil
}

type boundedFile struct {
	billy.File
	bytes *budget
}

func (f *boundedFile) Write(p []byte) (int, error) {
	if err := f.bytes.spend(int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

// cloneBudgets are the bounds of one checkout attempt.
type cloneBudgets struct {
	pack, tree, files *budget
}

func newCloneBudgets(maxSize int64, maxFiles int) *cloneBudgets {
	return &cloneBudgets{
		pack:  &budget{what: "size of the fetched objects", max: maxSize},
		tree:  &budget{what: "size of the checked-out files", max: maxSize},
		files: &budget{what: "file count", max: int64(maxFiles)},
	}
}

// exceeded returns the bound that stopped the clone, if one did: go-git
// may wrap or reword the write error it met.
func (c *cloneBudgets) exceeded(url, revision string) error {
	for _, b := range []*budget{c.pack, c.tree, c.files} {
		if b.exceeded.Load() {
			return &LimitError{URL: url, Revision: revision, What: b.what, Max: b.max}
		}
	}
	return nil
}
