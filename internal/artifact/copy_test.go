package artifact

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCopyTree(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"apps/web/Pulumi.yaml":  "name: web",
		"apps/web/run.sh*":      "#!/bin/sh",
		"apps/web/local-link":   "->Pulumi.yaml",
		"apps/web/shared-link":  "->../../lib",
		"apps/api/Pulumi.yaml":  "name: api",
		"apps/api/index.ts":     "export {}",
		"lib/x.txt":             "x",
		"current":               "->apps/api",
		"apps/file-not-dir.txt": "",
	})
	a, err := s.Put(ctx, src)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("subdir", func(t *testing.T) {
		g := NewWithT(t)
		dst := filepath.Join(t.TempDir(), "work")
		g.Expect(s.CopyTree(ctx, a, "apps/api", dst)).To(Succeed())
		b, err := os.ReadFile(filepath.Join(dst, "Pulumi.yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal("name: api"))
		g.Expect(filepath.Join(dst, "index.ts")).To(BeARegularFile())
		// Private copies are writable, the store's copy is untouched.
		g.Expect(os.WriteFile(filepath.Join(dst, "Pulumi.yaml"), []byte("changed"), 0o644)).To(Succeed())
		b, _ = os.ReadFile(filepath.Join(a.Path, "apps/api/Pulumi.yaml"))
		g.Expect(string(b)).To(Equal("name: api"))
	})

	t.Run("whole tree with exec bits and inner links", func(t *testing.T) {
		g := NewWithT(t)
		dst := t.TempDir()
		g.Expect(s.CopyTree(ctx, a, "", dst)).To(Succeed())
		fi, err := os.Stat(filepath.Join(dst, "apps/web/run.sh"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o755)))
		d, err := Digest(ctx, dst)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(Equal(a.Digest))
	})

	t.Run("subdir through an inner link", func(t *testing.T) {
		g := NewWithT(t)
		dst := t.TempDir()
		g.Expect(s.CopyTree(ctx, a, "current", dst)).To(Succeed())
		g.Expect(filepath.Join(dst, "index.ts")).To(BeARegularFile())
	})

	for name, tc := range map[string]struct {
		dir  string
		want string
	}{
		"dot dot":               {"../", "outside the source root"},
		"dot dot after a dir":   {"apps/../../etc", "outside the source root"},
		"absolute":              {"/etc", "relative to the source root"},
		"link out of subdir":    {"apps/web", "outside the tree"},
		"clean but deep escape": {"apps/api/../../../", "outside the source root"},
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			g := NewWithT(t)
			err := s.CopyTree(ctx, a, tc.dir, t.TempDir())
			var upe *UnsafePathError
			g.Expect(errors.As(err, &upe)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	t.Run("missing subdir", func(t *testing.T) {
		g := NewWithT(t)
		err := s.CopyTree(ctx, a, "apps/nope", t.TempDir())
		g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "got %v", err)
		g.Expect(s.CopyTree(ctx, a, "apps/file-not-dir.txt", t.TempDir())).To(MatchError(ContainSubstring("not a directory")))
	})

	t.Run("non-empty destination", func(t *testing.T) {
		g := NewWithT(t)
		dst := t.TempDir()
		writeTree(t, dst, map[string]string{"x": "y"})
		g.Expect(s.CopyTree(ctx, a, "apps/api", dst)).To(MatchError(ContainSubstring("not empty")))
	})
}

// Stored trees never hold links that leave them (Put refuses them), but
// SubdirPath also guards directories that did not come through Put.
func TestSubdirPathRefusesLinksOut(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"abs":          "->/etc",
		"up":           "->..",
		"sub/deep/top": "->../..",
		"ok/file":      "",
	})
	for _, dir := range []string{"abs", "up", "sub/deep/top/..", "sub/deep/top/../x"} {
		_, err := SubdirPath(root, dir)
		var upe *UnsafePathError
		g.Expect(errors.As(err, &upe)).To(BeTrue(), "%s: got %v", dir, err)
	}
	p, err := SubdirPath(root, "sub/deep/top/ok")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(filepath.Join(root, "ok")))
}
