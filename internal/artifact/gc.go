package artifact

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// tmpMaxAge is how long staging directories are left alone by GC. Clones
// and downloads stage there without the store's lock, so only their age
// tells that they were abandoned (by a crash).
const tmpMaxAge = 24 * time.Hour

// GC removes stored trees whose digest is not in keep and that were not
// stored or used (Get) within GCGracePeriod, index entries that point to
// removed trees, and abandoned staging directories. It returns the digests
// it removed. GC excludes all other store operations while it runs.
func (s *Store) GC(keep map[string]bool) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	now := time.Now()
	removed, err := s.gcTrees(keep, now)
	if err != nil {
		return removed, err
	}
	if err := s.gcIndex(); err != nil {
		return removed, err
	}
	return removed, s.gcTmp(now)
}

func (s *Store) gcTrees(keep map[string]bool, now time.Time) ([]string, error) {
	dir := filepath.Join(s.root, "sha256")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("artifact gc: %w", err)
	}
	var removed []string
	for _, e := range entries {
		digest := DigestPrefix + e.Name()
		if keep[digest] {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < s.GCGracePeriod {
			continue
		}
		if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
			return removed, fmt.Errorf("artifact gc: %w", err)
		}
		removed = append(removed, digest)
	}
	return removed, nil
}

func (s *Store) gcIndex() error {
	dir := filepath.Join(s.root, "index")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("artifact gc: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		digest, ok := readIndex(p)
		if ok {
			hex, _ := parseDigest(digest)
			if _, err := os.Stat(s.treePath(hex)); err == nil {
				continue
			}
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("artifact gc: %w", err)
		}
	}
	return nil
}

func (s *Store) gcTmp(now time.Time) error {
	dir := filepath.Join(s.root, "tmp")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("artifact gc: %w", err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < tmpMaxAge {
			continue
		}
		if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("artifact gc: %w", err)
		}
	}
	return nil
}
