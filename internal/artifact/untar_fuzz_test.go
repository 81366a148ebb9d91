package artifact

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fuzzLimits are small, so that bombs hit them with small inputs: the fuzzer
// minimises each new input it finds, which takes long on large ones.
var fuzzLimits = Limits{MaxBytes: 4 << 10, MaxFiles: 16}

// FuzzUntar feeds Untar arbitrary bytes and checks, whatever it returns:
// nothing is written outside the destination (its parent and grandparent hold
// nothing else), no device, FIFO or socket is created, the files hold at most
// MaxBytes and there are at most MaxFiles of them (implicit parent
// directories count), and no regular file is a hard link to a file outside.
// When Untar succeeds, no symbolic link in the tree resolves outside it, as
// the kernel resolves it (openat2 with RESOLVE_BENEATH).
func FuzzUntar(f *testing.F) {
	for _, seed := range untarSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		grand := t.TempDir()
		parent := filepath.Join(grand, "parent")
		if err := os.Mkdir(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(parent, "dst")
		err := Untar(bytes.NewReader(data), dst, fuzzLimits)
		checkOnly(t, grand, "parent")
		checkOnly(t, parent, "dst")
		checkTree(t, dst, err == nil)
	})
}

// checkOnly fails unless dir holds nothing but name (or nothing at all).
func checkOnly(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != name {
			t.Errorf("Untar wrote %s outside the destination", filepath.Join(dir, e.Name()))
		}
	}
}

func checkTree(t *testing.T, dst string, succeeded bool) {
	t.Helper()
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		return
	}
	root, err := unix.Open(dst, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	var total int64
	count := 0
	paths := map[uint64]int{}  // inode -> paths in the tree
	nlinks := map[uint64]int{} // inode -> its link count
	err = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dst {
			return nil
		}
		count++
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		st := fi.Sys().(*syscall.Stat_t)
		switch mode := fi.Mode(); {
		case mode.IsRegular():
			if paths[st.Ino] == 0 {
				total += fi.Size()
			}
			paths[st.Ino]++
			nlinks[st.Ino] = int(st.Nlink)
		case mode.IsDir():
		case mode&fs.ModeSymlink != 0:
			if succeeded {
				fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
				if err == nil {
					unix.Close(fd)
				}
				if errors.Is(err, unix.EXDEV) {
					target, _ := os.Readlink(p)
					t.Errorf("Untar succeeded, but the link %s -> %s resolves outside the destination", rel, target)
				}
			}
		default:
			t.Errorf("Untar created %s, of mode %s", rel, mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > fuzzLimits.MaxBytes {
		t.Errorf("Untar wrote %d bytes, over the limit of %d", total, fuzzLimits.MaxBytes)
	}
	if count > fuzzLimits.MaxFiles {
		t.Errorf("Untar created %d files and directories, over the limit of %d", count, fuzzLimits.MaxFiles)
	}
	for ino, n := range paths {
		if nlinks[ino] > n {
			t.Errorf("a file in the tree (inode %d) has %d links, %d of them outside the destination", ino, nlinks[ino], nlinks[ino]-n)
		}
	}
}

// untarSeeds are archives of every kind Untar must refuse or survive.
func untarSeeds(t testing.TB) [][]byte {
	e := func(entries ...tarEntry) []byte { return makeTar(t, entries...) }
	dir := func(name string) tarEntry { return tarEntry{Name: name, Type: tar.TypeDir} }
	file := func(name, body string) tarEntry { return tarEntry{Name: name, Body: body} }
	sym := func(name, to string) tarEntry { return tarEntry{Name: name, Type: tar.TypeSymlink, Linkname: to} }
	hard := func(name, to string) tarEntry { return tarEntry{Name: name, Type: tar.TypeLink, Linkname: to} }
	ordinary := e(dir("prog/"), file("prog/Pulumi.yaml", "name: x"), sym("prog/link", "Pulumi.yaml"), hard("prog/hard", "prog/Pulumi.yaml"))

	var many []tarEntry
	for i := range 40 {
		many = append(many, file(strings.Repeat("f", 1+i%10)+string(rune('a'+i%26)), ""))
	}
	seeds := [][]byte{
		ordinary,
		gz(t, ordinary),
		// Size bombs: one large file, compressed well; many medium ones.
		gz(t, e(file("zeros", strings.Repeat("\x00", 1<<20)))),
		e(file("a", strings.Repeat("a", 3<<10)), file("b", strings.Repeat("b", 3<<10))),
		// Count bombs: many entries; one entry with many implicit parents.
		gz(t, e(many...)),
		e(file(strings.Repeat("d/", 30)+"f", "x")),
		// Climbing out.
		e(file("../evil", "x")),
		e(file("a/../../evil", "x")),
		e(dir("../d/")),
		e(file("/abs", "x")),
		e(file("//abs", "x")),
		// Symbolic links out, directly, through chains and written through.
		e(sym("l", "../../outside")),
		e(sym("l", "/etc")),
		e(sym("l", ".."), file("l/evil", "x")),
		e(sym("a", "."), sym("b", "a/.."), file("b/x", "x")),
		e(dir("s/d/"), sym("s/d/up", "../.."), sym("z", "s/d/up/..")),
		e(sym("x", "missing/../../outside")),
		e(sym("l", "../parent-sibling"), file("l", "replaces the link, never writes through it")),
		// Hard links: out, absolute, through a link, to a directory, inside.
		e(hard("h", "../../etc/passwd")),
		e(hard("h", "/etc/passwd")),
		e(sym("d", "real"), file("real/f", "x"), hard("h", "d/f")),
		e(dir("dd/"), hard("h", "dd")),
		e(file("f", "x"), hard("h", "f"), file("f", "y")),
		e(sym("l", ".."), hard("h", "l/x")),
		// Devices, FIFOs.
		e(tarEntry{Name: "null", Type: tar.TypeChar}),
		e(tarEntry{Name: "sda", Type: tar.TypeBlock}),
		e(tarEntry{Name: "fifo", Type: tar.TypeFifo}),
		// Duplicates: file over file, dir over file, file over dir.
		e(file("f", "1"), file("f", "2")),
		e(file("f", "1"), dir("f/")),
		e(dir("f/"), file("f", "1")),
		e(dir("f/"), file("f/x", "1"), sym("f", ".")),
		// A header that lies about its size, past int64 overflow of the running total.
		lyingSize(t),
		// Garbage: gzip magic without a stream, a truncated stream, not a tar.
		{0x1f, 0x8b},
		{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0xde, 0xad},
		gz(t, ordinary)[:20],
		[]byte("not a tar at all"),
		{},
	}
	return seeds
}

// lyingSize is a small file, then one whose header announces nearly
// MaxInt64 bytes and carries 2*MaxBytes of them before the stream ends.
func lyingSize(t testing.TB) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "small", Typeflag: tar.TypeReg, Mode: 0o644, Size: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "huge", Typeflag: tar.TypeReg, Mode: 0o644, Size: math.MaxInt64 - 5, Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	buf.Write(bytes.Repeat([]byte("h"), int(2*fuzzLimits.MaxBytes)))
	return buf.Bytes()
}
