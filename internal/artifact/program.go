package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// MissingPathError reports a path a program depends on that is not in the
// artifact.
type MissingPathError struct {
	// Path is the path as given, relative to the artifact's root.
	Path string
}

func (e *MissingPathError) Error() string {
	return fmt.Sprintf("%q is not in the source", e.Path)
}

// ProgramDigest is the digest of what a program in a stored artifact depends
// on: the tree at dir ("" for the whole artifact) and each path of include,
// a file or a folder, relative to the artifact's root. Two revisions with the
// same program digest run the same program, however else they differ, which
// is how a commit elsewhere in a monorepo is told apart from one that
// touches the program.
//
// Each part is hashed as the artifact itself is (see Digest): content, exec
// bits and symbolic links (as their target paths; a link's target is not
// followed, so a program that reads through one lists the target's folder in
// include). Paths are cleaned ("shared/" is "shared"); the order of include
// and duplicates in it do not matter. The dir and the include paths are part
// of the digest, so moving a folder changes it.
//
// The digest of each (artifact, path) is computed once per Store and
// remembered, so the Stacks of a monorepo that share a commit and a folder
// hash it once between them. A missing include path is a
// *MissingPathError; an absolute one, or one that climbs out of the
// artifact, an *UnsafePathError.
func (s *Store) ProgramDigest(ctx context.Context, a Artifact, dir string, include []string) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()

	dirPath, err := cleanRel(dir)
	if err != nil {
		return "", err
	}
	if _, err := SubdirPath(a.Path, dirPath); err != nil {
		return "", err
	}
	paths := make([]string, 0, len(include))
	for _, p := range include {
		c, err := cleanRel(p)
		if err != nil {
			return "", err
		}
		paths = append(paths, c)
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)

	h := sha256.New()
	part := func(role, p string) error {
		d, err := s.digests.get(ctx, a.Digest+"\x00"+p, func() (string, error) { return pathDigest(ctx, a, p) })
		if err != nil {
			return err
		}
		h.Write([]byte(role + "\x00" + p + "\x00" + d + "\x00"))
		return nil
	}
	if err := part("dir", dirPath); err != nil {
		return "", err
	}
	for _, p := range paths {
		if err := part("include", p); err != nil {
			var missing *MissingPathError
			if errors.As(err, &missing) {
				missing.Path = includeLabel(include, p)
			}
			return "", err
		}
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// cleanRel cleans a relative, slash-separated path: "" and "." are the root
// ("."), a trailing slash is dropped. Absolute paths and ".." are refused.
func cleanRel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", &UnsafePathError{Path: p, Reason: "contains a NUL byte"}
	}
	slash := filepath.ToSlash(p)
	if path.IsAbs(slash) {
		return "", &UnsafePathError{Path: p, Reason: "must be a path relative to the source root"}
	}
	for _, c := range strings.Split(slash, "/") {
		if c == ".." {
			return "", &UnsafePathError{Path: p, Reason: "must not contain '..'"}
		}
	}
	if slash == "" {
		return ".", nil
	}
	return path.Clean(slash), nil
}

// includeLabel is the include entry as the user wrote it, for messages.
func includeLabel(include []string, cleaned string) string {
	for _, p := range include {
		if c, err := cleanRel(p); err == nil && c == cleaned {
			return p
		}
	}
	return cleaned
}

// pathDigest hashes one file or folder of an artifact. Symbolic links on the
// way to it are followed as long as they stay inside the artifact.
func pathDigest(ctx context.Context, a Artifact, rel string) (string, error) {
	if rel == "." {
		return a.Digest, nil // the artifact's own digest is that of its root
	}
	resolved, err := resolveInTree(a.Path, rel)
	if err != nil {
		return "", &UnsafePathError{Path: rel, Reason: "leads outside the source root: " + err.Error()}
	}
	full := filepath.Join(a.Path, resolved)
	fi, err := os.Lstat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist) || isNotDir(err):
		return "", &MissingPathError{Path: rel}
	case err != nil:
		return "", err
	case fi.IsDir():
		if resolved == "." {
			return a.Digest, nil
		}
		return copyTree(ctx, full, "", false, Limits{})
	case fi.Mode().IsRegular():
		sum, err := copyFile(full, "", 0)
		if err != nil {
			return "", err
		}
		return treeDigest([]entry{{".", fileRecord(".", fi.Mode().Perm()&0o111 != 0, sum)}}), nil
	}
	return "", &UnsafePathError{Path: rel, Reason: "not a regular file or directory"}
}
