package oci

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/sourceignore/gitignore"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

// BuildOptions select what of a folder goes into the layer.
type BuildOptions struct {
	// IgnorePaths are extra gitignore-style patterns, after Flux's default
	// list and the .sourceignore files.
	IgnorePaths []string
}

// Layer describes a built layer.
type Layer struct {
	Digest string   // sha256 of the compressed bytes
	Size   int64    // compressed size
	Files  []string // regular files and links, slash-separated, in archive order
}

// epoch is every entry's time: 0 in Unix time, whatever the time zone.
var epoch = time.Unix(0, 0).UTC()

// gzipLevel is fixed: the same input must give the same bytes.
const gzipLevel = gzip.BestCompression

// BuildLayer writes the reproducible tar+gzip of dir to w: entries in
// lexical walk order, uid/gid 0, no user or group names, mtime 0, mode
// 0644 or 0755 by the owner's exec bit (directories 0755), a gzip header
// without name or time. Files matched by Flux's default ignore list, the
// .sourceignore files or opts.IgnorePaths are left out. Symbolic links
// that stay inside dir are kept as links; one that leaves it (or is
// absolute) is an *artifact.UnsafePathError naming it. Devices, sockets and
// FIFOs are refused the same way.
func BuildLayer(dir string, opts BuildOptions, w io.Writer) (Layer, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return Layer{}, err
	}
	if fi, err := os.Stat(root); err != nil {
		return Layer{}, fmt.Errorf("reading the program folder: %w", err)
	} else if !fi.IsDir() {
		return Layer{}, fmt.Errorf("%s is not a directory: push takes a folder", dir)
	}
	m, err := ignoreMatcher(root, opts.IgnorePaths)
	if err != nil {
		return Layer{}, fmt.Errorf("reading .sourceignore files: %w", err)
	}

	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(w, h)}
	zw, err := gzip.NewWriterLevel(cw, gzipLevel)
	if err != nil {
		return Layer{}, err
	}
	tw := tar.NewWriter(zw)
	b := &builder{root: root, match: m, tw: tw}
	if err := filepath.WalkDir(root, b.visit); err != nil {
		return Layer{}, err
	}
	if err := tw.Close(); err != nil {
		return Layer{}, err
	}
	if err := zw.Close(); err != nil {
		return Layer{}, err
	}
	return Layer{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: cw.n, Files: b.files}, nil
}

type builder struct {
	root  string
	match gitignore.Matcher
	tw    *tar.Writer
	files []string
}

func (b *builder) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(b.root, p)
	if err != nil || rel == "." {
		return err
	}
	rel = filepath.ToSlash(rel)
	if ignored(b.match, rel, d.IsDir()) {
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	}
	hdr := &tar.Header{Name: rel, ModTime: epoch, Format: tar.FormatPAX}
	switch t := d.Type(); {
	case t.IsDir():
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, rel+"/", 0o755
		return b.tw.WriteHeader(hdr)
	case t&fs.ModeSymlink != 0:
		target, err := b.link(rel, p)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, target, 0o777
		b.files = append(b.files, rel)
		return b.tw.WriteHeader(hdr)
	case t.IsRegular():
		return b.file(hdr, rel, p)
	default:
		return &artifact.UnsafePathError{Path: rel, Reason: fmt.Sprintf("%s files cannot be packaged: remove it or add it to .sourceignore", t.Type())}
	}
}

// link returns the target of a symbolic link that stays inside the tree,
// checking the whole chain (a link to a link that leaves is refused too).
func (b *builder) link(rel, p string) (string, error) {
	target, err := os.Readlink(p)
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(target) || path.IsAbs(filepath.ToSlash(target)) {
		return "", &artifact.UnsafePathError{Path: rel, Reason: fmt.Sprintf("symbolic link to absolute path %q: make it relative to a file inside the folder", target)}
	}
	lexical := path.Join(path.Dir(rel), filepath.ToSlash(target))
	if lexical == ".." || strings.HasPrefix(lexical, "../") {
		return "", &artifact.UnsafePathError{Path: rel, Reason: fmt.Sprintf("symbolic link to %q leads outside the folder", target)}
	}
	if resolved, err := filepath.EvalSymlinks(p); err == nil {
		realRoot, rerr := filepath.EvalSymlinks(b.root)
		if rerr != nil {
			return "", rerr
		}
		if r, err := filepath.Rel(realRoot, resolved); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return "", &artifact.UnsafePathError{Path: rel, Reason: fmt.Sprintf("symbolic link to %q resolves outside the folder (through other links)", target)}
		}
	}
	return filepath.ToSlash(target), nil
}

func (b *builder) file(hdr *tar.Header, rel, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, fi.Size(), 0o644
	if fi.Mode()&0o100 != 0 {
		hdr.Mode = 0o755
	}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that changes size while we read it would make a corrupt
	// archive; tar.Writer reports it, and we say which file.
	if _, err := io.Copy(b.tw, f); err != nil {
		return fmt.Errorf("packaging %s: %w", rel, err)
	}
	b.files = append(b.files, rel)
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// tarStream opens a tar stream, gunzipping it when it starts with the
// gzip magic.
func tarStream(r io.Reader) (*tar.Reader, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		return tar.NewReader(zr), nil
	}
	return tar.NewReader(br), nil
}
