package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"sort"
)

// TarGz returns a tar+gzip of files (path -> content), entries sorted, as
// source-controller's artifacts are.
func TarGz(t TB, files map[string]string) []byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatalf("tar: %v", err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatalf("tar: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	return buf.Bytes()
}
