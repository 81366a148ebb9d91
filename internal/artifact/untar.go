package artifact

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bound what Untar accepts. Zero fields take the defaults.
type Limits struct {
	// MaxBytes is the total size of regular files, after decompression.
	MaxBytes int64
	// MaxFiles is the number of entries of any kind, counting the parent
	// directories an entry implies but the archive does not list (one entry
	// "a/b/.../z" must not make thousands of directories).
	MaxFiles int
	// MaxHeaderBytes is what the decompressed archive may hold besides file
	// content: headers, PAX and GNU long-name records, padding. archive/tar
	// reads extension records inside Next, where no entry count sees them,
	// so without this bound a small gzip of back-to-back records costs
	// unbounded decompression. The default is HeaderBytesPerFile per
	// MaxFiles, at least MinHeaderBytes; with MaxBytes it bounds the whole
	// decompressed stream.
	MaxHeaderBytes int64
}

const (
	DefaultMaxBytes = 1 << 30 // 1 GiB
	DefaultMaxFiles = 100_000
	// HeaderBytesPerFile is the default header budget of one entry: its
	// 512-byte header, up to 511 bytes of padding, and a PAX record naming
	// a path of PATH_MAX.
	HeaderBytesPerFile = 6 << 10
	// MinHeaderBytes is the smallest default header budget.
	MinHeaderBytes = 1 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = max(MinHeaderBytes, int64(l.MaxFiles)*HeaderBytesPerFile)
	}
	return l
}

// Untar extracts a tar stream, gzip-compressed or not, into dst (created if
// needed). Archives come from registries and users, so it refuses, with an
// *UnsafePathError or *LimitError:
//   - absolute names and names that climb out of dst with "..";
//   - writing through a symbolic link (an entry "a/b" after a link "a");
//   - symbolic links that resolve outside dst, also through other links;
//   - hard links to anything but a regular file already extracted;
//   - devices and FIFOs;
//   - more than limits.MaxFiles entries (PAX global headers included),
//     limits.MaxBytes of file content or limits.MaxHeaderBytes of the rest;
//     it stops reading at the bound, so the decompressed stream it reads is
//     at most MaxBytes + MaxHeaderBytes whatever the archive announces.
//
// Owners, times and permission bits other than exec are not restored. On
// error, dst may hold a partial tree: extract into a fresh directory and
// remove it on failure.
func Untar(r io.Reader, dst string, limits Limits) error {
	limits = limits.withDefaults()
	x := &extractor{dst: dst, limits: limits}
	tr, err := tarReader(r, x)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading archive: %w", err)
		}
		if err := x.entry(h, tr); err != nil {
			return err
		}
	}
	return x.checkLinks()
}

// tarReader sniffs the gzip magic so callers need not know whether a layer
// is compressed. What the tar reader reads, decompressed, is metered by x.
func tarReader(r io.Reader, x *extractor) (*tar.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		return tar.NewReader(&meteredReader{r: zr, x: x}), nil
	}
	return tar.NewReader(&meteredReader{r: br, x: x}), nil
}

// meteredReader sits between the decompressor and the tar reader and
// refuses to deliver more header bytes (everything read that is not file
// content) than the limit allows. It is the only place that sees the
// extension records archive/tar consumes inside Next.
type meteredReader struct {
	r    io.Reader
	x    *extractor
	read int64
}

func (m *meteredReader) Read(p []byte) (int, error) {
	// Never read past the budget left: the bound holds within one Read.
	left := m.x.limits.MaxHeaderBytes - (m.read - m.x.bytes)
	if left <= 0 {
		return 0, &LimitError{Limit: "header size", Max: m.x.limits.MaxHeaderBytes}
	}
	// File content is counted as it is copied, so while a file is being
	// extracted the budget grows with it; bounding one read to what is
	// left of the header budget plus the file's own remainder keeps it exact.
	if room := left + m.x.pending; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := m.r.Read(p)
	m.read += int64(n)
	return n, err
}

type extractor struct {
	dst    string
	limits Limits
	files  int
	// bytes is the file content extracted so far, counted as it is copied.
	bytes int64
	// pending is what remains to be copied of the file being extracted.
	pending int64
	links   []string // symbolic links, checked when the tree is complete
}

func (x *extractor) entry(h *tar.Header, r io.Reader) error {
	// Every header counts, PAX global ones too: they are not entries of the
	// tree, but each costs a read.
	x.files++
	if x.files > x.limits.MaxFiles {
		return &LimitError{Limit: "file count", Max: int64(x.limits.MaxFiles)}
	}
	if h.Typeflag == tar.TypeXGlobalHeader {
		return nil // PAX metadata, nothing to extract
	}
	name, err := entryName(h.Name)
	if err != nil || name == "." {
		return err
	}
	target := filepath.Join(x.dst, filepath.FromSlash(name))
	if err := x.mkParents(name); err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return x.mkdir(name, target)
	case tar.TypeReg, tar.TypeGNUSparse: // archive/tar reports old-style regular files (TypeRegA) as TypeReg
		return x.file(name, target, h, r)
	case tar.TypeSymlink:
		return x.symlink(name, target, h.Linkname)
	case tar.TypeLink:
		return x.hardlink(name, target, h.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return &UnsafePathError{Path: name, Reason: "device files and FIFOs are not allowed"}
	default:
		return &UnsafePathError{Path: name, Reason: fmt.Sprintf("unsupported entry type %q", h.Typeflag)}
	}
}

// entryName validates an archive path and returns it cleaned, with "/"
// separators.
func entryName(raw string) (string, error) {
	if raw == "" {
		return "", &UnsafePathError{Path: raw, Reason: "empty name"}
	}
	if strings.HasPrefix(raw, "/") || filepath.IsAbs(raw) {
		return "", &UnsafePathError{Path: raw, Reason: "absolute paths are not allowed"}
	}
	name := path.Clean(raw)
	if name == ".." || strings.HasPrefix(name, "../") {
		return "", &UnsafePathError{Path: raw, Reason: "path leads outside the destination"}
	}
	return name, nil
}

// mkParents creates the parent directories of name, refusing to pass
// through anything that is not a real directory: a symbolic link there
// would redirect the write outside dst.
func (x *extractor) mkParents(name string) error {
	parts := strings.Split(name, "/")
	cur := x.dst
	for i, p := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			x.files++
			if x.files > x.limits.MaxFiles {
				return &LimitError{Limit: "file count", Max: int64(x.limits.MaxFiles)}
			}
			if err := os.Mkdir(cur, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return &UnsafePathError{Path: name, Reason: fmt.Sprintf("would be written through the symbolic link %q", strings.Join(parts[:i+1], "/"))}
		case !fi.IsDir():
			return &UnsafePathError{Path: name, Reason: fmt.Sprintf("parent %q is not a directory", strings.Join(parts[:i+1], "/"))}
		}
	}
	return nil
}

func (x *extractor) mkdir(name, target string) error {
	fi, err := os.Lstat(target)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return &UnsafePathError{Path: name, Reason: "directory entry replaces a file or link"}
	}
	return os.Mkdir(target, 0o755)
}

// clearPath removes whatever non-directory is at target so a later entry can
// replace an earlier one, as tar does, without ever writing through a link.
func clearPath(name, target string) error {
	fi, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &UnsafePathError{Path: name, Reason: "entry replaces a directory"}
	}
	return os.Remove(target)
}

func (x *extractor) file(name, target string, h *tar.Header, r io.Reader) error {
	// Compared as a remainder: a header may announce nearly MaxInt64 bytes,
	// and x.bytes+h.Size would overflow past the check.
	if h.Size < 0 || h.Size > x.limits.MaxBytes-x.bytes {
		return &LimitError{Limit: "size", Max: x.limits.MaxBytes}
	}
	if err := clearPath(name, target); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// The header's size is trusted only as an upper bound: reading one
	// byte more than it announces would mean a broken reader, and the
	// limit must hold whatever happens.
	x.pending = h.Size
	_, err = io.Copy(f, &contentReader{r: io.LimitReader(r, h.Size), x: x})
	x.pending = 0
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("extracting %q: %w", name, err)
	}
	return os.Chmod(target, fileMode(h.Mode&0o111 != 0, false))
}

// contentReader counts file content as the tar reader hands it out, so the
// metered reader below it can tell content from header bytes.
type contentReader struct {
	r io.Reader
	x *extractor
}

func (c *contentReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.x.bytes += int64(n)
	c.x.pending -= int64(n)
	return n, err
}

func (x *extractor) symlink(name, target, linkname string) error {
	if linkname == "" || path.IsAbs(linkname) || filepath.IsAbs(linkname) {
		return &UnsafePathError{Path: name, Reason: fmt.Sprintf("symbolic link to absolute path %q", linkname)}
	}
	// A lexical check now catches the plain cases early; checkLinks
	// catches escapes through chains of links once all entries exist.
	resolved := path.Join(path.Dir(name), linkname)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return &UnsafePathError{Path: name, Reason: fmt.Sprintf("symbolic link to %q leads outside the destination", linkname)}
	}
	if err := clearPath(name, target); err != nil {
		return err
	}
	x.links = append(x.links, name)
	return os.Symlink(linkname, target)
}

func (x *extractor) hardlink(name, target, linkname string) error {
	src, err := entryName(linkname)
	if err != nil {
		return &UnsafePathError{Path: name, Reason: fmt.Sprintf("hard link to %q leads outside the destination", linkname)}
	}
	// The link target must be a regular file reached through real
	// directories only; resolving it must not move it.
	if rel, err := resolveInTree(x.dst, src); err != nil || filepath.ToSlash(rel) != src {
		return &UnsafePathError{Path: name, Reason: fmt.Sprintf("hard link to %q goes through a symbolic link or outside the destination", linkname)}
	}
	oldname := filepath.Join(x.dst, filepath.FromSlash(src))
	fi, err := os.Lstat(oldname)
	if err != nil || !fi.Mode().IsRegular() {
		return &UnsafePathError{Path: name, Reason: fmt.Sprintf("hard link to %q, which is not a regular file extracted before it", linkname)}
	}
	if err := clearPath(name, target); err != nil {
		return err
	}
	return os.Link(oldname, target)
}

func (x *extractor) checkLinks() error {
	for _, name := range x.links {
		if _, err := resolveInTree(x.dst, filepath.FromSlash(name)); err != nil {
			return &UnsafePathError{Path: name, Reason: "symbolic link leads outside the destination: " + err.Error()}
		}
	}
	return nil
}
