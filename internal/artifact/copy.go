package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CopyTree copies the directory subdir of a stored artifact ("" or "." for
// all of it) to dst, which must not exist or be empty, as writable files:
// operations may write into their work directory (Pulumi stack settings,
// installed dependencies) and must never alter the cache.
//
// subdir must name a directory inside the artifact: absolute paths, ".."
// that climbs out and symbolic links that lead out are refused with an
// *UnsafePathError. Symbolic links inside subdir must stay inside subdir,
// since anything outside it is not copied. A missing subdir is an error
// satisfying errors.Is(err, fs.ErrNotExist).
func (s *Store) CopyTree(ctx context.Context, a Artifact, subdir, dst string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()

	srcDir, err := SubdirPath(a.Path, subdir)
	if err != nil {
		return err
	}
	if err := prepareDst(dst); err != nil {
		return err
	}
	if _, err := copyTree(ctx, srcDir, dst, false, s.Limits); err != nil {
		var upe *UnsafePathError
		if errors.As(err, &upe) && subdir != "" {
			upe.Path = filepath.ToSlash(filepath.Join(subdir, upe.Path))
			upe.Reason = fmt.Sprintf("%s (the program directory is %q)", upe.Reason, subdir)
		}
		return err
	}
	return nil
}

// SubdirPath returns the real path of directory subdir inside root,
// following symbolic links only as long as they stay inside root. It is how
// a user-supplied program directory ("spec.source.dir") is turned into a
// path, and refuses, with an *UnsafePathError, any that would leave root.
func SubdirPath(root, subdir string) (string, error) {
	if subdir == "" {
		subdir = "."
	}
	if filepath.IsAbs(subdir) {
		return "", &UnsafePathError{Path: subdir, Reason: "must be a path relative to the source root"}
	}
	rel, err := resolveInTree(root, subdir)
	if err != nil {
		return "", &UnsafePathError{Path: subdir, Reason: "leads outside the source root: " + err.Error()}
	}
	p := filepath.Join(root, rel)
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("directory %q in the source: %w", subdir, fs.ErrNotExist)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%q in the source is not a directory", subdir)
	}
	return p, nil
}

func prepareDst(dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("copy destination %s is not empty", dst)
	}
	return nil
}
