package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// WorkTreeStats says how a work tree was made.
type WorkTreeStats struct {
	Linked      int   // files hard-linked to the store's copy
	Copied      int   // files copied: Pulumi settings files, and link failures
	CopiedBytes int64 // bytes written by the copies
	// LinkFallback is the error that made the rest of the tree be copied
	// (a work directory on another file system than the store: EXDEV).
	LinkFallback error

	linked []linkedFile // what Verify checks
}

// linkedFile is a stored file as it was when linked.
type linkedFile struct {
	path  string // in the store
	size  int64
	mtime time.Time
}

// LinkTree fills dst, which must not exist or be empty, with a private view
// of the whole artifact and returns where subdir ("" or "." for the root) is
// in it. It costs a directory per directory and a hard link per file rather
// than a copy of every byte: an operation's work directory is made in
// microseconds per file and takes no space, whatever the repository's size.
//
// The whole tree is there, not only subdir, because a program may read files
// next to it (fn::readFile: ../shared/policy.json in Pulumi YAML). subdir is
// resolved with SubdirPath's rules (*UnsafePathError, fs.ErrNotExist).
//
// A hard link shares the store's file: a write into it in place would
// change the cache for every Stack. Linked files are read-only (0444, 0555),
// which stops any writer but root; and the files Pulumi writes in place
// (Pulumi.yaml, and Pulumi.<stack>.yaml, which the runner and `pulumi config`
// rewrite with os.WriteFile, truncating whatever file is there) are copied, at
// any depth: those are the only files Pulumi and its YAML language host write
// into a project. Symbolic links are recreated as they are (Put made sure they
// stay inside the tree). When a link fails the file is copied instead; after
// EXDEV (dst on another file system) every remaining file is.
func (s *Store) LinkTree(ctx context.Context, a Artifact, subdir, dst string) (string, WorkTreeStats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := treeLinker{link: os.Link}
	program, err := l.linkTree(ctx, a.Path, subdir, dst)
	return program, l.stats, err
}

// treeLinker makes one work tree; link is os.Link but for tests.
type treeLinker struct {
	link  func(oldname, newname string) error
	stats WorkTreeStats
}

func (l *treeLinker) linkTree(ctx context.Context, root, subdir, dst string) (string, error) {
	src, err := SubdirPath(root, subdir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, src)
	if err != nil {
		return "", err
	}
	if err := prepareDst(dst); err != nil {
		return "", err
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := filepath.Rel(root, p)
		if err != nil || r == "." {
			return err
		}
		out := filepath.Join(dst, r)
		switch t := d.Type(); {
		case t.IsDir():
			return os.Mkdir(out, 0o755)
		case t.IsRegular():
			return l.file(p, out, d)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		default:
			return &UnsafePathError{Path: filepath.ToSlash(r), Reason: "not a regular file, directory or symbolic link"}
		}
	})
	if err != nil {
		return "", fmt.Errorf("prepare the work tree: %w", err)
	}
	return filepath.Join(dst, rel), nil
}

// file links, or copies, one regular file.
func (l *treeLinker) file(src, dst string, d fs.DirEntry) error {
	if !writtenInPlace(d.Name()) && l.stats.LinkFallback == nil {
		err := l.link(src, dst)
		if err == nil {
			l.stats.Linked++
			if info, err := d.Info(); err == nil {
				l.stats.linked = append(l.stats.linked, linkedFile{src, info.Size(), info.ModTime()})
			}
			return nil
		}
		if errors.Is(err, syscall.EXDEV) {
			l.stats.LinkFallback = err // no other file will link either
		}
		// Anything else (EMLINK, EPERM under protected_hardlinks) is about
		// this file: copy it, and try linking the next.
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	n, err := copyPlain(src, dst, fileMode(info.Mode().Perm()&0o111 != 0, false))
	l.stats.Copied++
	l.stats.CopiedBytes += n
	return err
}

// writtenInPlace reports whether Pulumi rewrites a file of this name in
// place: the project file and stack settings files (Pulumi.yaml,
// Pulumi.<stack>.yaml, and their .yml spellings).
func writtenInPlace(name string) bool {
	return strings.HasPrefix(name, "Pulumi.") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// copyPlain copies src to a new file dst, writable, with mode. io.Copy
// between files lets the kernel copy (copy_file_range), without hashing:
// the content is the store's, already verified.
func copyPlain(src, dst string, mode os.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	return n, os.Chmod(dst, mode)
}

// Verify is the guard behind the read-only modes, which do not stop root:
// after an operation, it reports the stored files linked into w that were
// written since (through the link, in place), and removes the artifact a from
// the store if there are any, so that no later operation runs the altered
// program (the next reconcile fetches the revision again). Size and
// modification time tell a write; a link changes neither.
func (s *Store) Verify(a Artifact, w WorkTreeStats) ([]string, error) {
	var changed []string
	for _, f := range w.linked {
		fi, err := os.Lstat(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // collected by GC meanwhile: nothing left to protect
		}
		if err != nil || fi.Size() != f.size || !fi.ModTime().Equal(f.mtime) {
			rel, _ := filepath.Rel(a.Path, f.path)
			changed = append(changed, filepath.ToSlash(rel))
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	hex, err := parseDigest(a.Digest)
	if err != nil {
		return changed, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return changed, removeAll(s.treePath(hex))
}
