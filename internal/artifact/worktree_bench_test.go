package artifact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkWorkTree prepares an operation's work directory from a stored
// repository of 2,000 files and 50 MB (40 folders of 50 files of 25 KB, one
// Pulumi project with a committed stack file): by copying all of it
// (CopyTree, as before for a program at the root), copying the program's
// folder alone (CopyTree of dir00, as before for a program in a folder, which
// then could not read beside it), and by linking all of it (LinkTree, now).
// Removing the directory again is not timed. private-bytes/op is what the
// work directory adds to the disk. Run with:
//
//	go test -run '^$' -bench BenchmarkWorkTree -benchtime 20x ./internal/artifact/
func BenchmarkWorkTree(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	src := b.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	content := make([]byte, 25_000)
	for d := range 40 {
		for f := range 50 {
			for i := range content {
				content[i] = byte(rng.Uint32())
			}
			p := filepath.Join(src, fmt.Sprintf("dir%02d/file%02d.bin", d, f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, content, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	writeTree(b, src, map[string]string{
		"dir00/Pulumi.yaml":     "name: app\nruntime: yaml\n",
		"dir00/Pulumi.dev.yaml": "config:\n  app:x: y\n",
	})
	a, err := s.Put(ctx, src)
	if err != nil {
		b.Fatal(err)
	}
	for _, method := range []string{"copy", "copy-subdir", "link"} {
		b.Run(method, func(b *testing.B) {
			root := b.TempDir()
			var written int64
			b.ResetTimer()
			for i := range b.N {
				dst := filepath.Join(root, fmt.Sprint(i))
				switch method {
				case "copy":
					if err := s.CopyTree(ctx, a, "", dst); err != nil {
						b.Fatal(err)
					}
				case "copy-subdir":
					if err := s.CopyTree(ctx, a, "dir00", dst); err != nil {
						b.Fatal(err)
					}
				case "link":
					_, stats, err := s.LinkTree(ctx, a, "dir00", dst)
					if err != nil {
						b.Fatal(err)
					}
					if stats.Linked != 2000 {
						b.Fatalf("linked %d files, want 2000", stats.Linked)
					}
				}
				b.StopTimer()
				written += privateBytes(b, a.Path, dst)
				if err := os.RemoveAll(dst); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(written)/float64(b.N), "private-bytes/op")
		})
	}
}

// privateBytes is the size of the files in dst that are not the store's
// (hard links to it take no space).
func privateBytes(b *testing.B, store, dst string) int64 {
	var n int64
	err := filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		w, err := os.Stat(p)
		if err != nil {
			return err
		}
		if c, err := os.Stat(filepath.Join(store, rel)); err == nil && os.SameFile(w, c) {
			return nil
		}
		n += w.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
