package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Artifact is a tree in the store.
type Artifact struct {
	// Digest is "sha256:<hex>", see Digest.
	Digest string `json:"digest"`
	// Path is the directory holding the tree. Its files are read-only;
	// use LinkTree for an operation's work tree, CopyTree for a writable copy.
	Path string `json:"path"`
}

// DefaultGCGracePeriod protects artifacts that were just stored or used from
// a GC that runs with a keep set computed a moment earlier.
const DefaultGCGracePeriod = 15 * time.Minute

// Store is a content-addressed cache of trees rooted at a directory:
//
//	<root>/sha256/<hex>/   one tree per digest, read-only files
//	<root>/index/<hex>     sha256(key) -> digest, see Link
//	<root>/tmp/            staging, on the same file system so that
//	                       publishing is a rename
//
// A Store is safe for concurrent use by many goroutines, and by several
// Stores on the same root in one process. Several processes may share a
// root too, except that GC must then run in only one of them.
type Store struct {
	root string
	// GCGracePeriod: GC keeps artifacts stored or returned by Get more
	// recently than this, whatever the keep set says.
	GCGracePeriod time.Duration
	// Limits bound each tree Put stores and CopyTree copies (file content
	// and entries); zero fields take Untar's defaults.
	Limits Limits

	// mu makes GC exclusive: everything else holds it for reading, so a
	// tree is never removed while it is being published, found or copied.
	mu sync.RWMutex

	// digests remembers program digests (ProgramDigest).
	digests digestCache
}

// NewStore opens (creating if needed) a store rooted at dir.
func NewStore(dir string) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"sha256", "index", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			return nil, fmt.Errorf("artifact store: %w", err)
		}
	}
	return &Store{root: root, GCGracePeriod: DefaultGCGracePeriod}, nil
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

// TempDir creates a fresh directory for staging (a clone, a download) on the
// store's file system. The caller removes it; GC removes forgotten ones
// after a day.
func (s *Store) TempDir(pattern string) (string, error) {
	return os.MkdirTemp(filepath.Join(s.root, "tmp"), pattern)
}

func (s *Store) treePath(hex string) string { return filepath.Join(s.root, "sha256", hex) }

// Put stores a copy of the tree at srcDir (".git" left out) and returns it.
// srcDir is not modified; the caller may remove it afterwards. The copy is
// made (and hashed) in staging and published with one rename; if the digest
// is stored already, the new copy is dropped and the stored one returned,
// so concurrent Puts of the same tree all succeed with the same Artifact.
//
// Symbolic links must stay inside the tree, and only files, directories and
// links are accepted; otherwise Put returns an *UnsafePathError.
func (s *Store) Put(ctx context.Context, srcDir string) (Artifact, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()

	staging, err := s.TempDir("put-")
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact store: %w", err)
	}
	defer os.RemoveAll(staging) // a no-op once renamed away

	digest, err := copyTree(ctx, srcDir, staging, true, s.Limits)
	if err != nil {
		return Artifact{}, fmt.Errorf("storing %s: %w", srcDir, err)
	}
	if err := os.Chmod(staging, 0o755); err != nil {
		return Artifact{}, err
	}
	hex, _ := parseDigest(digest)
	final := s.treePath(hex)
	// Publishing is one rename, so readers see a whole tree or none. A
	// rename onto an existing, non-empty directory fails: that is another
	// Put of the same content that won, and its copy is as good as ours.
	if err := os.Rename(staging, final); err != nil {
		if _, statErr := os.Stat(final); statErr != nil {
			return Artifact{}, fmt.Errorf("artifact store: publishing %s: %w", digest, err)
		}
	}
	touch(final)
	return Artifact{Digest: digest, Path: final}, nil
}

// Get returns the artifact with the given digest, if stored. It counts as a
// use for GC's grace period.
func (s *Store) Get(digest string) (Artifact, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	hex, err := parseDigest(digest)
	if err != nil {
		return Artifact{}, false
	}
	p := s.treePath(hex)
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return Artifact{}, false
	}
	touch(p)
	return Artifact{Digest: digest, Path: p}, true
}

// Has reports whether the digest is stored, without counting as a use.
func (s *Store) Has(digest string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	hex, err := parseDigest(digest)
	if err != nil {
		return false
	}
	fi, err := os.Stat(s.treePath(hex))
	return err == nil && fi.IsDir()
}

// touch records a use in the directory's mtime, which GC reads. A failure
// only shortens the grace period, so it is ignored.
func touch(p string) {
	now := time.Now()
	_ = os.Chtimes(p, now, now)
}

// removeAll removes a tree whose directories may have lost their write bit
// (they have not in trees we made, but a partial copy may be anything).
func removeAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	return os.RemoveAll(p)
}
