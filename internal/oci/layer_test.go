package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

// manifestDigestOf packages dir as Push would and returns the manifest
// digest, without a registry.
func manifestDigestOf(t *testing.T, dir string) string {
	t.Helper()
	img, cleanup, err := buildImage(dir, PushOptions{Source: "https://example.com/app.git", Revision: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestHelperManifestDigest is run as a subprocess by
// TestBuildIsReproducible, so that TZ takes effect from process start.
func TestHelperManifestDigest(t *testing.T) {
	dir := os.Getenv("STACKPILOT_OCI_DIGEST_DIR")
	if dir == "" {
		t.Skip("subprocess helper")
	}
	os.Stdout.WriteString("DIGEST=" + manifestDigestOf(t, dir) + "\n")
}

func digestInSubprocess(t *testing.T, dir, tz string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperManifestDigest$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STACKPILOT_OCI_DIGEST_DIR="+dir, "TZ="+tz)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("subprocess: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if d, ok := strings.CutPrefix(line, "DIGEST="); ok {
			return d
		}
	}
	t.Fatalf("no digest in subprocess output:\n%s", out)
	return ""
}

func TestBuildIsReproducible(t *testing.T) {
	files := map[string]string{
		"Pulumi.yaml": "name: demo\nruntime: yaml\n", "a/b/c.yaml": "c: 1\n", "a.txt": "a", "bin/tool": "x:#!/bin/sh\n",
	}
	one, two := t.TempDir(), t.TempDir()
	writeTree(t, one, files)
	writeTree(t, two, files)
	// Different times, and permission bits that should not matter
	// (group/other bits, read-only): only the owner's exec bit counts.
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	_ = filepath.WalkDir(one, func(p string, d os.DirEntry, err error) error {
		return os.Chtimes(p, old, old)
	})
	if err := os.Chmod(filepath.Join(two, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(two, "bin/tool"), 0o700); err != nil {
		t.Fatal(err)
	}
	utc := digestInSubprocess(t, one, "UTC")
	tokyo := digestInSubprocess(t, two, "Asia/Tokyo")
	if utc != tokyo {
		t.Fatalf("same folder, different manifest digests: %s (copy 1, TZ=UTC) vs %s (copy 2, TZ=Asia/Tokyo)", utc, tokyo)
	}
	if here := manifestDigestOf(t, two); here != utc {
		t.Fatalf("in-process digest %s differs from %s", here, utc)
	}
	// And content does count.
	writeTree(t, two, map[string]string{"a.txt": "b"})
	if changed := manifestDigestOf(t, two); changed == utc {
		t.Fatal("changing a file did not change the digest")
	}
}

type entryInfo struct {
	name, uname, gname string
	uid, gid           int
	mode               int64
	mtime              int64
	typ                byte
	link               string
}

func listLayer(t *testing.T, data []byte) ([]entryInfo, *gzip.Header) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	hdr := zr.Header
	tr := tar.NewReader(zr)
	var out []entryInfo
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, &hdr
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entryInfo{h.Name, h.Uname, h.Gname, h.Uid, h.Gid, h.Mode, h.ModTime.Unix(), h.Typeflag, h.Linkname})
	}
}

func TestBuildLayerHeaders(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"b.txt": "b", "a/x.sh": "x:echo\n", "a/y.txt": "y"})
	if err := os.Symlink("a/y.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	l, err := BuildLayer(dir, BuildOptions{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if l.Size != int64(buf.Len()) || !strings.HasPrefix(l.Digest, "sha256:") {
		t.Errorf("Layer = %+v for %d bytes", l, buf.Len())
	}
	entries, gz := listLayer(t, buf.Bytes())
	if gz.Name != "" || !gz.ModTime.IsZero() || gz.Comment != "" {
		t.Errorf("gzip header carries name/time: %+v", gz)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.name)
		if e.uid != 0 || e.gid != 0 || e.uname != "" || e.gname != "" || e.mtime != 0 {
			t.Errorf("%s: owner/time not zeroed: %+v", e.name, e)
		}
	}
	if want := []string{"a/", "a/x.sh", "a/y.txt", "b.txt", "link"}; !slices.Equal(names, want) {
		t.Errorf("entries %v, want %v", names, want)
	}
	modes := map[string]int64{"a/": 0o755, "a/x.sh": 0o755, "a/y.txt": 0o644, "b.txt": 0o644}
	for _, e := range entries {
		if m, ok := modes[e.name]; ok && e.mode != m {
			t.Errorf("%s: mode %o, want %o", e.name, e.mode, m)
		}
		if e.name == "link" && (e.typ != tar.TypeSymlink || e.link != "a/y.txt") {
			t.Errorf("link kept as %+v", e)
		}
	}
	if want := []string{"a/x.sh", "a/y.txt", "b.txt", "link"}; !slices.Equal(l.Files, want) {
		t.Errorf("Files = %v, want %v", l.Files, want)
	}
}

func TestBuildLayerIgnores(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Pulumi.yaml": "name: x\n", ".git/config": "[core]\n", ".gitignore": "x\n", "logo.png": "png",
		"dist/app.tar.gz": "tgz", "notes.md": "n", "secret.env": "s", "sub/.sourceignore": "local.txt\n",
		"sub/local.txt": "l", "sub/kept.txt": "k", "build/out.bin": "o", "keep.zip.txt": "k",
		".sourceignore": "# comment\n*.env\n", ".github/workflows/ci.yml": "on: push\n",
	})
	var buf bytes.Buffer
	l, err := BuildLayer(dir, BuildOptions{IgnorePaths: []string{"build/", "notes.md"}}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	// Flux's `flux push artifact` default ignores VCS files and the binary
	// extensions, not CI folders: .github stays, as with Flux.
	want := []string{".github/workflows/ci.yml", ".sourceignore", "Pulumi.yaml", "keep.zip.txt", "sub/.sourceignore", "sub/kept.txt"}
	if !slices.Equal(l.Files, want) {
		t.Errorf("Files = %v\nwant %v", l.Files, want)
	}
}

func TestBuildLayerRefusesLinksOutOfTheTree(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret": "s"})
	for _, tc := range []struct{ name, target, reason string }{
		{"abs", filepath.Join(outside, "secret"), "absolute"},
		{"up", "../../etc/passwd", "outside the folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"Pulumi.yaml": "name: x\n"})
			if err := os.Symlink(tc.target, filepath.Join(dir, "sub-link")); err != nil {
				t.Fatal(err)
			}
			_, err := BuildLayer(dir, BuildOptions{}, io.Discard)
			var ue *artifact.UnsafePathError
			if !errors.As(err, &ue) || ue.Path != "sub-link" || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v, want an UnsafePathError naming sub-link (%s)", err, tc.reason)
			}
		})
	}
	t.Run("through another link", func(t *testing.T) {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"Pulumi.yaml": "name: x\n"})
		// "out" points outside by an absolute path (refused itself); here
		// a relative link into a directory link that leaves.
		if err := os.Symlink(outside, filepath.Join(dir, "z-dir")); err != nil {
			t.Fatal(err)
		}
		if _, err := BuildLayer(dir, BuildOptions{IgnorePaths: []string{"z-dir"}}, io.Discard); err != nil {
			t.Fatalf("an ignored link must not matter: %v", err)
		}
		if err := os.Symlink("z-dir/secret", filepath.Join(dir, "a-chain")); err != nil {
			t.Fatal(err)
		}
		_, err := BuildLayer(dir, BuildOptions{IgnorePaths: []string{"z-dir"}}, io.Discard)
		var ue *artifact.UnsafePathError
		if !errors.As(err, &ue) || ue.Path != "a-chain" {
			t.Fatalf("err = %v, want an UnsafePathError naming a-chain", err)
		}
	})
}

func TestBuildLayerRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"Pulumi.yaml": "name: x\n"})
	l, err := net.Listen("unix", filepath.Join(dir, "agent.sock"))
	if err != nil {
		t.Skipf("unix socket: %v", err)
	}
	defer l.Close()
	_, err = BuildLayer(dir, BuildOptions{}, io.Discard)
	var ue *artifact.UnsafePathError
	if !errors.As(err, &ue) || ue.Path != "agent.sock" || !strings.Contains(err.Error(), ".sourceignore") {
		t.Fatalf("err = %v, want an UnsafePathError naming agent.sock and the way out", err)
	}
	if _, err := BuildLayer(dir, BuildOptions{IgnorePaths: []string{"*.sock"}}, io.Discard); err != nil {
		t.Fatalf("ignored socket: %v", err)
	}
}

func TestSourceignoreCanReinclude(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"Pulumi.yaml": "name: x\n", "logo.png": "p", "other.png": "o", ".sourceignore": "!logo.png\n"})
	l, err := BuildLayer(dir, BuildOptions{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".sourceignore", "Pulumi.yaml", "logo.png"}; !slices.Equal(l.Files, want) {
		t.Errorf("Files = %v, want %v", l.Files, want)
	}
}
