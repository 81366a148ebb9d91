package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The index maps a source key, such as "<url>@<commit>", to a digest, so a
// revision seen before is served from the store without network access.
// Keys are hashed into file names: they may be long and contain any
// character, and the file name then says nothing about the source.

func (s *Store) indexPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.root, "index", hex.EncodeToString(sum[:]))
}

// Link records that key maps to digest, replacing any earlier mapping.
// The digest should be stored; Lookup does not check it is.
func (s *Store) Link(key, digest string) error {
	if _, err := parseDigest(digest); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "index-")
	if err != nil {
		return fmt.Errorf("artifact index: %w", err)
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	// The key follows the digest for people reading the directory; it
	// must never carry credentials, which callers guarantee.
	if _, err := f.WriteString(digest + "\n" + key + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("artifact index: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("artifact index: %w", err)
	}
	if err := os.Rename(f.Name(), s.indexPath(key)); err != nil {
		return fmt.Errorf("artifact index: %w", err)
	}
	return nil
}

// Lookup returns the digest key maps to, if any.
func (s *Store) Lookup(key string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return readIndex(s.indexPath(key))
}

func readIndex(p string) (string, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	digest, _, _ := strings.Cut(string(b), "\n")
	if _, err := parseDigest(digest); err != nil {
		return "", false
	}
	return digest, true
}
