package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// tarEntry describes one archive entry for the tests; Type defaults to a
// regular file holding Body.
type tarEntry struct {
	Name     string
	Type     byte
	Body     string
	Linkname string
	Mode     int64
	Size     int64 // overrides len(Body) in the header when set
}

func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Linkname: e.Linkname, Mode: e.Mode}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUntarExtractsOrdinaryArchives(t *testing.T) {
	g := NewWithT(t)
	archive := makeTar(t,
		tarEntry{Name: "./", Type: tar.TypeDir},
		tarEntry{Name: "prog/", Type: tar.TypeDir},
		tarEntry{Name: "prog/Pulumi.yaml", Body: "name: x"},
		tarEntry{Name: "prog/run.sh", Body: "#!/bin/sh", Mode: 0o4755},
		tarEntry{Name: "deep/implicit/parent.txt", Body: "p"},
		tarEntry{Name: "prog/link", Type: tar.TypeSymlink, Linkname: "Pulumi.yaml"},
		tarEntry{Name: "prog/up", Type: tar.TypeSymlink, Linkname: "../deep"},
		tarEntry{Name: "prog/hard", Type: tar.TypeLink, Linkname: "prog/Pulumi.yaml"},
		tarEntry{Name: "prog/Pulumi.yaml", Body: "name: replaced"},
		tarEntry{Name: "dangling", Type: tar.TypeSymlink, Linkname: "nowhere"},
		// A later entry replaces a link rather than writing through it.
		tarEntry{Name: "replaced", Type: tar.TypeSymlink, Linkname: "deep/implicit/parent.txt"},
		tarEntry{Name: "replaced", Body: "own content"},
	)
	for name, data := range map[string][]byte{"plain": archive, "gzip": gz(t, archive)} {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "out")
			g.Expect(Untar(bytes.NewReader(data), dst, Limits{})).To(Succeed())
			b, err := os.ReadFile(filepath.Join(dst, "prog/Pulumi.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).To(Equal("name: replaced"))
			b, err = os.ReadFile(filepath.Join(dst, "prog/hard"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).To(Equal("name: x"))
			fi, err := os.Stat(filepath.Join(dst, "prog/run.sh"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o755)), "exec kept, setuid dropped")
			g.Expect(fi.Mode() & os.ModeSetuid).To(BeZero())
			g.Expect(filepath.Join(dst, "prog/up/implicit/parent.txt")).To(BeARegularFile())
			b, err = os.ReadFile(filepath.Join(dst, "deep/implicit/parent.txt"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(b)).To(Equal("p"))
			g.Expect(filepath.Join(dst, "replaced")).To(BeARegularFile())
		})
	}
}

func TestUntarRefusesMaliciousArchives(t *testing.T) {
	big := strings.Repeat("x", 1000)
	for name, tc := range map[string]struct {
		entries []tarEntry
		limits  Limits
		want    string // substring of the error
		limit   bool   // a *LimitError rather than an *UnsafePathError
	}{
		"absolute path": {
			entries: []tarEntry{{Name: "/etc/cron.d/evil", Body: "x"}},
			want:    "absolute",
		},
		"dot dot": {
			entries: []tarEntry{{Name: "../evil", Body: "x"}},
			want:    "outside",
		},
		"dot dot in the middle": {
			entries: []tarEntry{{Name: "a/../../evil", Body: "x"}},
			want:    "outside",
		},
		"directory outside": {
			entries: []tarEntry{{Name: "../d/", Type: tar.TypeDir}},
			want:    "outside",
		},
		"absolute symlink": {
			entries: []tarEntry{{Name: "passwd", Type: tar.TypeSymlink, Linkname: "/etc/passwd"}},
			want:    "absolute",
		},
		"symlink climbing out": {
			entries: []tarEntry{{Name: "a/b", Type: tar.TypeSymlink, Linkname: "../../x"}},
			want:    "outside",
		},
		"write through symlink": {
			entries: []tarEntry{
				{Name: "d", Type: tar.TypeSymlink, Linkname: "."},
				{Name: "d/x", Body: "x"},
			},
			want: "through the symbolic link",
		},
		"symlink out, then a file of the same name": {
			entries: []tarEntry{
				{Name: "l", Type: tar.TypeSymlink, Linkname: "../outside"},
				{Name: "l", Body: "x"},
			},
			want: "outside",
		},
		"escape through a chain of links": {
			entries: []tarEntry{
				{Name: "sub/deep/", Type: tar.TypeDir},
				{Name: "sub/deep/up", Type: tar.TypeSymlink, Linkname: "../.."},
				{Name: "z", Type: tar.TypeSymlink, Linkname: "sub/deep/up/.."},
			},
			want: "outside",
		},
		"hard link outside": {
			entries: []tarEntry{{Name: "h", Type: tar.TypeLink, Linkname: "../../etc/passwd"}},
			want:    "outside",
		},
		"hard link absolute": {
			entries: []tarEntry{{Name: "h", Type: tar.TypeLink, Linkname: "/etc/passwd"}},
			want:    "outside",
		},
		"hard link through a symlink": {
			entries: []tarEntry{
				{Name: "d", Type: tar.TypeSymlink, Linkname: "real"},
				{Name: "real/f", Body: "x"},
				{Name: "h", Type: tar.TypeLink, Linkname: "d/f"},
			},
			want: "symbolic link",
		},
		"hard link to a missing file": {
			entries: []tarEntry{{Name: "h", Type: tar.TypeLink, Linkname: "nothing"}},
			want:    "not a regular file",
		},
		"character device": {
			entries: []tarEntry{{Name: "null", Type: tar.TypeChar}},
			want:    "device",
		},
		"block device": {
			entries: []tarEntry{{Name: "sda", Type: tar.TypeBlock}},
			want:    "device",
		},
		"fifo": {
			entries: []tarEntry{{Name: "pipe", Type: tar.TypeFifo}},
			want:    "FIFO",
		},
		"too big": {
			entries: []tarEntry{{Name: "a", Body: big}, {Name: "b", Body: big}},
			limits:  Limits{MaxBytes: 1500},
			want:    "size limit of 1500",
			limit:   true,
		},
		"too many files": {
			entries: []tarEntry{{Name: "a"}, {Name: "b"}, {Name: "c"}},
			limits:  Limits{MaxFiles: 2},
			want:    "file count limit of 2",
			limit:   true,
		},
		"too many implicit parent directories": {
			entries: []tarEntry{{Name: strings.Repeat("d/", 10) + "f", Body: "x"}},
			limits:  Limits{MaxFiles: 5},
			want:    "file count limit of 5",
			limit:   true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			parent := t.TempDir()
			dst := filepath.Join(parent, "out")
			err := Untar(bytes.NewReader(makeTar(t, tc.entries...)), dst, tc.limits)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			if tc.limit {
				var le *LimitError
				g.Expect(errors.As(err, &le)).To(BeTrue(), "got %T %v", err, err)
			} else {
				var upe *UnsafePathError
				g.Expect(errors.As(err, &upe)).To(BeTrue(), "got %T %v", err, err)
			}
			// Nothing was written beside dst.
			entries, _ := os.ReadDir(parent)
			for _, e := range entries {
				g.Expect(e.Name()).To(Equal("out"))
			}
		})
	}
}

// A header that claims less than the data holds cannot smuggle bytes past
// the size limit, and one that claims more is a truncated archive.
func TestUntarLimitHoldsForLyingHeaders(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	g.Expect(tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 10, Mode: 0o644})).To(Succeed())
	_, err := tw.Write([]byte("0123456789"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tw.Close()).To(Succeed())
	err = Untar(bytes.NewReader(buf.Bytes()), t.TempDir(), Limits{MaxBytes: 9})
	var le *LimitError
	g.Expect(errors.As(err, &le)).To(BeTrue())

	truncated := buf.Bytes()[:512+5]
	g.Expect(Untar(bytes.NewReader(truncated), t.TempDir(), Limits{})).To(HaveOccurred())

	// A size near MaxInt64 after a first file: the running total must not
	// overflow past the check and let the data through.
	dst := t.TempDir()
	err = Untar(bytes.NewReader(lyingSize(t)), dst, fuzzLimits)
	g.Expect(errors.As(err, &le)).To(BeTrue(), "got %v", err)
	_, statErr := os.Stat(filepath.Join(dst, "huge"))
	g.Expect(statErr).To(MatchError(os.ErrNotExist), "nothing of the huge file is written")
}
