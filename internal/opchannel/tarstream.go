package opchannel

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// writeTree writes the tree at root as a tar stream: entries in lexical
// order (filepath.WalkDir's), so the same tree is the same stream; regular
// files, directories and symbolic links as they are (the store refused links
// that leave the tree when it took the tree in); ".git" left out as
// artifact.Digest leaves it out. Only what the digest covers is kept: the
// exec bit (0755 or 0644), no owners, no times.
func writeTree(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return writeEntry(tw, p, filepath.ToSlash(rel), d)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, p, name string, d fs.DirEntry) error {
	h := &tar.Header{Name: name, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	switch t := d.Type(); {
	case t.IsDir():
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, name+"/", 0o755
		return tw.WriteHeader(h)
	case t&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		return tw.WriteHeader(h)
	case t.IsRegular():
		return writeFile(tw, p, h)
	default:
		return fmt.Errorf("%s: not a regular file, directory or symbolic link", name)
	}
}

func writeFile(tw *tar.Writer, p string, h *tar.Header) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h.Typeflag, h.Size, h.Mode = tar.TypeReg, fi.Size(), 0o644
	if fi.Mode().Perm()&0o111 != 0 {
		h.Mode = 0o755
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	// A file that changed size since Stat makes the tar writer fail (too
	// long) or the copy end short: either way the stream is aborted.
	n, err := io.Copy(tw, io.LimitReader(f, h.Size+1))
	if err == nil && n != h.Size {
		err = fmt.Errorf("%s changed while it was sent", h.Name)
	}
	return err
}
