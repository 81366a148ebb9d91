package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DigestPrefix is the algorithm part of every digest this package makes.
const DigestPrefix = "sha256:"

// entry is one node of a tree as it enters the digest.
type entry struct {
	path string // slash-separated, relative to the tree root
	rec  []byte // the bytes hashed for this node
}

// The digest of a tree is sha256 over its entries sorted by relative path,
// each encoded as
//
//	"d" path NUL                          a directory
//	"f" ("x"|"-") path NUL sha256hex NUL  a file; "x" if any exec bit is set
//	"l" path NUL target NUL               a symbolic link
//
// Paths and link targets cannot contain NUL, so the encoding is unambiguous.
// Only what a program can observe and git can record goes in: owners,
// times and permission bits other than exec do not, so the same commit
// checked out twice, anywhere, has the same digest. ".git" is left out.
func dirRecord(p string) []byte { return []byte("d" + p + "\x00") }

func fileRecord(p string, exec bool, sum []byte) []byte {
	x := "-"
	if exec {
		x = "x"
	}
	return []byte("f" + x + p + "\x00" + hex.EncodeToString(sum) + "\x00")
}

func linkRecord(p, target string) []byte { return []byte("l" + p + "\x00" + target + "\x00") }

func treeDigest(entries []entry) string {
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	h := sha256.New()
	for _, e := range entries {
		h.Write(e.rec)
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// Digest computes the digest of the tree at dir without copying it.
func Digest(ctx context.Context, dir string) (string, error) {
	return copyTree(ctx, dir, "", false, Limits{})
}

// isGitPath reports whether a relative path is, or is inside, a ".git"
// entry at any depth (submodules carry a ".git" file).
func isGitPath(rel string) bool {
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		if c == ".git" {
			return true
		}
	}
	return false
}

// copyTree walks src, copying it to dst when dst is not empty, and returns
// the tree digest. Copied files are read-only when readOnly is set (the
// store's copies) and writable otherwise. Symbolic links are copied as
// links and must resolve inside src; anything that is neither file,
// directory nor link is refused. A copy (dst set) stops with a *LimitError
// past limits' entries or file bytes; hashing alone is not bounded.
func copyTree(ctx context.Context, src, dst string, readOnly bool, limits Limits) (string, error) {
	limits = limits.withDefaults()
	var entries []entry
	var links []string
	var bytes int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if isGitPath(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		slash := filepath.ToSlash(rel)
		out := ""
		if dst != "" {
			out = filepath.Join(dst, rel)
			if len(entries) >= limits.MaxFiles {
				return &LimitError{Limit: "file count", Max: int64(limits.MaxFiles), Of: "tree"}
			}
		}
		switch t := d.Type(); {
		case t.IsDir():
			entries = append(entries, entry{slash, dirRecord(slash)})
			if out != "" {
				return os.Mkdir(out, 0o755)
			}
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			exec := info.Mode().Perm()&0o111 != 0
			if out != "" {
				// Checked before copying, as a remainder so a huge size cannot overflow.
				if info.Size() > limits.MaxBytes-bytes {
					return &LimitError{Limit: "size", Max: limits.MaxBytes, Of: "tree"}
				}
				bytes += info.Size()
			}
			sum, err := copyFile(p, out, fileMode(exec, readOnly))
			if err != nil {
				return err
			}
			entries = append(entries, entry{slash, fileRecord(slash, exec, sum)})
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			entries = append(entries, entry{slash, linkRecord(slash, target)})
			links = append(links, rel)
			if out != "" {
				return os.Symlink(target, out)
			}
		default:
			return &UnsafePathError{Path: slash, Reason: "not a regular file, directory or symbolic link"}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	// Links are checked once the whole tree is known: whether a link
	// escapes can depend on other links.
	for _, rel := range links {
		if _, err := resolveInTree(src, rel); err != nil {
			return "", &UnsafePathError{Path: filepath.ToSlash(rel), Reason: "symbolic link points outside the tree: " + err.Error()}
		}
	}
	return treeDigest(entries), nil
}

func fileMode(exec, readOnly bool) os.FileMode {
	switch {
	case exec && readOnly:
		return 0o555
	case readOnly:
		return 0o444
	case exec:
		return 0o755
	default:
		return 0o644
	}
}

// copyFile hashes src and, when dst is not empty, copies it there with the
// given mode. It returns the sha256 of the content.
func copyFile(src, dst string, mode os.FileMode) ([]byte, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	h := sha256.New()
	if dst == "" {
		if _, err := io.Copy(h, in); err != nil {
			return nil, err
		}
		return h.Sum(nil), nil
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return nil, err
	}
	if err := out.Close(); err != nil {
		return nil, err
	}
	// Chmod rather than a creation mode, so the process umask cannot
	// change what the digest promises about exec bits.
	if err := os.Chmod(dst, mode); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// parseDigest validates a "sha256:<hex>" digest and returns the hex part.
// Digests become path components, so anything else is refused.
func parseDigest(d string) (string, error) {
	hexPart, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || len(hexPart) != sha256.Size*2 {
		return "", fmt.Errorf("invalid digest %q: want %s<64 hex digits>", d, DigestPrefix)
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("invalid digest %q: want lower-case hex", d)
		}
	}
	return hexPart, nil
}
