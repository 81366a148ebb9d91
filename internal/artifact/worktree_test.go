package artifact

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

var workTreeSample = map[string]string{
	"apps/web/Pulumi.yaml":     "name: web\nruntime: yaml\n",
	"apps/web/Pulumi.dev.yaml": "config:\n  web:committed: yes\n",
	"apps/web/main.yaml":       "resources: {}",
	"apps/web/run.sh*":         "#!/bin/sh",
	"apps/web/shared-link":     "->../../shared",
	"apps/api/Pulumi.yml":      "name: api\nruntime: yaml\n",
	"shared/policy.json":       `{"allow": true}`,
	"current":                  "->apps/web",
}

func storedSample(t *testing.T) (*Store, Artifact) {
	t.Helper()
	s := newStore(t)
	src := t.TempDir()
	writeTree(t, src, workTreeSample)
	a, err := s.Put(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return s, a
}

// The work tree is the whole artifact: files hard-linked to the store's
// copies, except Pulumi's settings files, which are private copies.
func TestLinkTreeLinksFiles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, a := storedSample(t)
	dst := filepath.Join(t.TempDir(), "tree")
	program, stats, err := s.LinkTree(ctx, a, "apps/web", dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(program).To(Equal(filepath.Join(dst, "apps/web")))
	g.Expect(stats.Linked).To(Equal(3))
	g.Expect(stats.Copied).To(Equal(3))
	g.Expect(stats.CopiedBytes).To(Equal(int64(len(workTreeSample["apps/web/Pulumi.yaml"]) +
		len(workTreeSample["apps/web/Pulumi.dev.yaml"]) + len(workTreeSample["apps/api/Pulumi.yml"]))))
	g.Expect(stats.LinkFallback).To(BeNil())

	same := func(rel string) bool {
		w, err := os.Stat(filepath.Join(dst, rel))
		g.Expect(err).NotTo(HaveOccurred())
		c, err := os.Stat(filepath.Join(a.Path, rel))
		g.Expect(err).NotTo(HaveOccurred())
		return os.SameFile(w, c)
	}
	for _, rel := range []string{"apps/web/main.yaml", "apps/web/run.sh", "shared/policy.json"} {
		g.Expect(same(rel)).To(BeTrue(), "%s is linked", rel)
	}
	for _, rel := range []string{"apps/web/Pulumi.yaml", "apps/web/Pulumi.dev.yaml", "apps/api/Pulumi.yml"} {
		g.Expect(same(rel)).To(BeFalse(), "%s is a private copy", rel)
		fi, _ := os.Stat(filepath.Join(dst, rel))
		g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o644)))
	}
	// A program reads files beside its folder, directly or through its links.
	b, err := os.ReadFile(filepath.Join(program, "../../shared/policy.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(workTreeSample["shared/policy.json"]))
	g.Expect(filepath.Join(program, "shared-link/policy.json")).To(BeARegularFile())
	// Same content, exec bits and links as the artifact.
	d, err := Digest(ctx, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(a.Digest))
	g.Expect(os.RemoveAll(dst)).To(Succeed(), "read-only links are removable")
	g.Expect(Digest(ctx, a.Path)).To(Equal(a.Digest))
}

// The runner writes Pulumi.<stack>.yaml with os.WriteFile, which truncates
// the file in place: written through a hard link it would change the cached
// program of every Stack. The committed stack file is a copy, so the cache
// is unchanged.
func TestLinkTreeStackFileWriteLeavesCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, a := storedSample(t)
	program, _, err := s.LinkTree(ctx, a, "apps/web", t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"Pulumi.dev.yaml", "Pulumi.yaml", "Pulumi.prod.yaml"} {
		g.Expect(os.WriteFile(filepath.Join(program, name), []byte("config: {web:x: overwritten}\n"), 0o600)).To(Succeed())
	}
	for _, rel := range []string{"apps/web/Pulumi.dev.yaml", "apps/web/Pulumi.yaml"} {
		b, err := os.ReadFile(filepath.Join(a.Path, rel))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal(workTreeSample[rel]), rel)
	}
	g.Expect(filepath.Join(a.Path, "apps/web/Pulumi.prod.yaml")).NotTo(BeAnExistingFile())
	g.Expect(Digest(ctx, a.Path)).To(Equal(a.Digest))
}

// On another file system (EXDEV) every file is copied, and linking is not
// tried again; another link error copies that file only.
func TestLinkTreeFallsBackToCopies(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		err       error
		wantCalls int
		fallback  bool
	}{
		"EXDEV": {syscall.EXDEV, 1, true},
		"EPERM": {syscall.EPERM, 3, false},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, a := storedSample(t)
			calls := 0
			l := treeLinker{link: func(oldname, newname string) error {
				calls++
				return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: tc.err}
			}}
			dst := t.TempDir()
			program, err := l.linkTree(ctx, a.Path, "current", dst)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(program).To(Equal(filepath.Join(dst, "apps/web")))
			g.Expect(calls).To(Equal(tc.wantCalls))
			g.Expect(l.stats.Linked).To(BeZero())
			g.Expect(l.stats.Copied).To(Equal(6))
			g.Expect(l.stats.LinkFallback != nil).To(Equal(tc.fallback))
			fi, err := os.Stat(filepath.Join(dst, "apps/web/run.sh"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o755)))
			g.Expect(Digest(ctx, dst)).To(Equal(a.Digest))
		})
	}
}

func TestLinkTreeRefusesBadDirs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, a := storedSample(t)
	_, _, err := s.LinkTree(ctx, a, "apps/nope", t.TempDir())
	g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "got %v", err)
	for _, dir := range []string{"../", "/etc", "apps/../../x"} {
		_, _, err := s.LinkTree(ctx, a, dir, t.TempDir())
		var upe *UnsafePathError
		g.Expect(errors.As(err, &upe)).To(BeTrue(), "%s: got %v", dir, err)
	}
	full := t.TempDir()
	writeTree(t, full, map[string]string{"x": "y"})
	_, _, err = s.LinkTree(ctx, a, "", full)
	g.Expect(err).To(MatchError(ContainSubstring("not empty")))
}

// A write through a link (root ignores the read-only mode) is found after
// the operation, and the altered artifact leaves the store; writes to the
// private copies and new files are not reported.
func TestVerifyEvictsAlteredArtifact(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, a := storedSample(t)
	program, stats, err := s.LinkTree(ctx, a, "apps/web", t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(program, "Pulumi.dev.yaml"), []byte("config: {}\n"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(program, "new.txt"), []byte("x"), 0o600)).To(Succeed())
	changed, err := s.Verify(a, stats)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(BeEmpty())
	g.Expect(s.Has(a.Digest)).To(BeTrue())

	linked := filepath.Join(program, "main.yaml")
	g.Expect(os.Chmod(linked, 0o644)).To(Succeed()) // as a non-root writer would have to
	g.Expect(os.WriteFile(linked, []byte("resources: {changed: true}"), 0o644)).To(Succeed())
	changed, err = s.Verify(a, stats)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).To(Equal([]string{"apps/web/main.yaml"}))
	g.Expect(s.Has(a.Digest)).To(BeFalse(), "the altered tree is gone from the store")
}
