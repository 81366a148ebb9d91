package artifact

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// rawHeader is one 512-byte ustar header block of the given type and data
// size, checksummed: archive/tar would not write the extension headers we
// need back to back, so the tests write them by hand.
func rawHeader(name string, typ byte, size int64) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], "00000000000\x00")
	b[156] = typ
	copy(b[257:265], "ustar\x0000")
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// longNameStream is n GNU long-name headers (each naming the next entry
// with size bytes of 'a'), then an ordinary long name and one small file and the end of the archive,
// produced as it is read: the stream can be far larger than memory.
func longNameStream(n int, size int64) io.Reader {
	pad := (512 - size%512) % 512
	var parts []io.Reader
	for range n {
		parts = append(parts,
			bytes.NewReader(rawHeader("././@LongLink", tar.TypeGNULongName, size)),
			io.LimitReader(repeatByte('a'), size),
			io.LimitReader(repeatByte(0), pad))
	}
	// A last, ordinary long name: the stream is a valid archive of one file.
	name := "app/" + strings.Repeat("n", 150) + ".yaml"
	parts = append(parts,
		bytes.NewReader(rawHeader("././@LongLink", tar.TypeGNULongName, int64(len(name)))),
		strings.NewReader(name+strings.Repeat("\x00", 512-len(name))))
	var tail bytes.Buffer
	tw := tar.NewWriter(&tail)
	_ = tw.WriteHeader(&tar.Header{Name: "Pulumi.yaml", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	_, _ = tw.Write([]byte("x\n"))
	_ = tw.Close()
	parts = append(parts, &tail)
	return io.MultiReader(parts...)
}

type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// countingReader counts what Untar read.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestUntarBoundsExtensionHeaders (issue 21, item 9): archive/tar consumes
// GNU long-name and PAX records inside Next, so a stream of them never
// reached the limits: 300 MiB of long names before one 2-byte file was read
// to the end and accepted. Every header byte now counts, and Untar stops
// reading at the bound.
func TestUntarBoundsExtensionHeaders(t *testing.T) {
	g := NewWithT(t)
	const size = 1<<20 - 1 // archive/tar's own cap on one record
	limits := Limits{MaxBytes: 1 << 20, MaxFiles: 100}
	in := &countingReader{r: longNameStream(300, size)}
	err := Untar(in, t.TempDir(), limits)
	var le *LimitError
	g.Expect(errors.As(err, &le)).To(BeTrue(), "want a LimitError, got %.200v", err)
	g.Expect(le.Limit).To(Equal("header size"))
	g.Expect(err.Error()).To(ContainSubstring("header"))
	// The default header budget for 100 files is 1 MiB: Untar stops within
	// a record or two of it, not at the end of the stream.
	g.Expect(in.n).To(BeNumerically("<=", 4<<20), "read %d bytes of a %d-byte stream", in.n, int64(300)*(size+513))

	// Through gzip too: the whole stream compresses to a few hundred KiB.
	var zipped bytes.Buffer
	_, err = io.Copy(&zipped, longNameStream(40, size))
	g.Expect(err).NotTo(HaveOccurred())
	small := gz(t, zipped.Bytes())
	g.Expect(len(small)).To(BeNumerically("<", 1<<20))
	err = Untar(bytes.NewReader(small), t.TempDir(), limits)
	g.Expect(errors.As(err, &le)).To(BeTrue(), "gzip: want a LimitError, got %.200v", err)
}

// PAX global headers are entries too: a stream of them is refused at the
// file count, where before they were skipped before counting.
func TestUntarCountsGlobalHeaders(t *testing.T) {
	g := NewWithT(t)
	var buf bytes.Buffer
	for range 200 {
		body := "30 comment=" + strings.Repeat("g", 18) + "\n"
		buf.Write(rawHeader("pax_global_header", tar.TypeXGlobalHeader, int64(len(body))))
		buf.WriteString(body)
		buf.Write(make([]byte, 512-len(body)))
	}
	buf.Write(makeTar(t, tarEntry{Name: "Pulumi.yaml", Body: "x\n"}))
	err := Untar(bytes.NewReader(buf.Bytes()), t.TempDir(), Limits{MaxFiles: 100})
	var le *LimitError
	g.Expect(errors.As(err, &le)).To(BeTrue(), "want a LimitError, got %v", err)
	g.Expect(le.Limit).To(Equal("file count"))

	// An ordinary archive with long names and PAX records is within the
	// default header budget.
	var entries []tarEntry
	for i := range 50 {
		entries = append(entries, tarEntry{Name: fmt.Sprintf("%s/%d.txt", strings.Repeat("long-dir-name/", 20), i), Body: "ok"})
	}
	g.Expect(Untar(bytes.NewReader(makeTar(t, entries...)), t.TempDir(), Limits{MaxFiles: 200})).To(Succeed())
}
