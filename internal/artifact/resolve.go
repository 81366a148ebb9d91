package artifact

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds symlink chains the way the kernel does (ELOOP).
const maxLinks = 40

var errEscapes = errors.New("escapes the tree")

// resolveInTree resolves rel inside root the way the kernel would, following
// symbolic links, but fails instead of leaving root: an absolute link
// target, or a ".." above root at any point of the walk, is an escape.
// Checking link targets lexically is not enough: a link to "../.." that is
// harmless where it stands can become an escape when reached through
// another link, so every component is resolved against the real tree.
//
// Missing components are allowed (dangling links stay inside the tree);
// the rest of the path is then resolved lexically. The result is a clean
// relative path ("." for root).
func resolveInTree(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", errEscapes
	}
	pending := splitPath(rel)
	var resolved []string
	links := 0
	missing := false
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(resolved) == 0 {
				return "", errEscapes
			}
			resolved = resolved[:len(resolved)-1]
			continue
		}
		if missing {
			resolved = append(resolved, c)
			continue
		}
		full := filepath.Join(root, filepath.Join(resolved...), c)
		fi, err := os.Lstat(full)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
				missing = true
				resolved = append(resolved, c)
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = append(resolved, c)
			continue
		}
		links++
		if links > maxLinks {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := os.Readlink(full)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			return "", errEscapes
		}
		// The target is relative to the directory holding the link,
		// which is what resolved is now.
		pending = append(splitPath(target), pending...)
	}
	if len(resolved) == 0 {
		return ".", nil
	}
	return filepath.Join(resolved...), nil
}

func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p), "/")
}

func isNotDir(err error) bool {
	return errors.Is(err, syscall.ENOTDIR)
}
