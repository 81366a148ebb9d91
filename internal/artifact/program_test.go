package artifact

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

var monorepo = map[string]string{
	"a/Pulumi.yaml":      "name: a\nruntime: yaml\n",
	"a/run.sh*":          "#!/bin/sh\n",
	"a/link":             "->Pulumi.yaml",
	"b/Pulumi.yaml":      "name: b\nruntime: yaml\n",
	"shared/lib.yaml":    "lib",
	"shared/deep/x.yaml": "x",
	"README.md":          "readme",
}

// put stores monorepo with changes applied (a value of "" removes the path).
func put(t *testing.T, s *Store, changes map[string]string) Artifact {
	t.Helper()
	files := maps.Clone(monorepo)
	for k, v := range changes {
		delete(files, k)
		if v != "" {
			files[k] = v
		}
	}
	dir := t.TempDir()
	writeTree(t, dir, files)
	a, err := s.Put(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestProgramDigest(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	base := put(t, s, nil)
	digest := func(a Artifact, dir string, include ...string) string {
		t.Helper()
		d, err := s.ProgramDigest(ctx, a, dir, include)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	want := digest(base, "a", "shared/")

	tests := []struct {
		name    string
		changes map[string]string
		dir     string
		include []string
		same    bool
	}{
		{name: "a commit elsewhere", changes: map[string]string{"b/Pulumi.yaml": "name: b2\n", "README.md": "new"}, dir: "a", include: []string{"shared/"}, same: true},
		{name: "include order, duplicates and slashes", dir: "a/", include: []string{"shared", "./shared/", "shared"}, same: true},
		{name: "a file in dir", changes: map[string]string{"a/Pulumi.yaml": "name: a\nruntime: yaml\n# edit\n"}, dir: "a", include: []string{"shared/"}},
		{name: "a file in an include folder", changes: map[string]string{"shared/deep/x.yaml": "y"}, dir: "a", include: []string{"shared/"}},
		{name: "a new file in dir", changes: map[string]string{"a/new.txt": "n"}, dir: "a", include: []string{"shared/"}},
		{name: "an exec bit", changes: map[string]string{"a/run.sh*": "", "a/run.sh": "#!/bin/sh\n"}, dir: "a", include: []string{"shared/"}},
		{name: "a link target", changes: map[string]string{"a/link": "->run.sh"}, dir: "a", include: []string{"shared/"}},
		{name: "another include path", dir: "a", include: []string{"shared/deep"}},
		{name: "no include", dir: "a"},
		{name: "another dir", dir: "b", include: []string{"shared/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := digest(put(t, s, tt.changes), tt.dir, tt.include...)
			if tt.same {
				NewWithT(t).Expect(got).To(Equal(want))
			} else {
				NewWithT(t).Expect(got).NotTo(Equal(want))
			}
		})
	}

	t.Run("an include file", func(t *testing.T) {
		g := NewWithT(t)
		file := digest(base, "a", "shared/lib.yaml")
		g.Expect(digest(put(t, s, map[string]string{"shared/deep/x.yaml": "other"}), "a", "shared/lib.yaml")).To(Equal(file))
		g.Expect(digest(put(t, s, map[string]string{"shared/lib.yaml": "lib2"}), "a", "shared/lib.yaml")).NotTo(Equal(file))
		g.Expect(digest(put(t, s, map[string]string{"shared/lib.yaml": "", "shared/lib.yaml*": "lib"}), "a", "shared/lib.yaml")).NotTo(Equal(file), "the exec bit counts")
	})
	t.Run("the whole tree", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(digest(base, "")).To(Equal(digest(base, ".")))
		g.Expect(digest(put(t, s, map[string]string{"README.md": "new"}), "")).NotTo(Equal(digest(base, "")))
	})
}

func TestProgramDigestRefusesBadPaths(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a := put(t, s, nil)

	_, err := s.ProgramDigest(ctx, a, "a", []string{"shared/", "lib/"})
	var missing *MissingPathError
	NewWithT(t).Expect(errors.As(err, &missing)).To(BeTrue(), "%v", err)
	NewWithT(t).Expect(missing.Path).To(Equal("lib/"), "named as the spec names it")

	for _, p := range []string{"/etc", "../x", "shared/../../x", "shared/../x"} {
		_, err := s.ProgramDigest(ctx, a, "b", []string{p})
		var unsafe *UnsafePathError
		NewWithT(t).Expect(errors.As(err, &unsafe)).To(BeTrue(), "%s: %v", p, err)
	}
	_, err = s.ProgramDigest(ctx, a, "nope", nil)
	NewWithT(t).Expect(err).To(HaveOccurred())
}

// Fifty Stacks of one commit, each with its own folder and the shared one,
// hash each folder once between them, also when they ask at the same time.
func TestProgramDigestIsComputedOncePerPath(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newStore(t)
	a := put(t, s, nil)
	var wg sync.WaitGroup
	digests := make([]string, 50)
	for i := range digests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := []string{"a", "b"}[i%2]
			d, err := s.ProgramDigest(ctx, a, dir, []string{"shared/"})
			if err != nil {
				t.Error(err)
			}
			digests[i] = d
		}()
	}
	wg.Wait()
	g.Expect(s.digests.computed).To(Equal(3), "a, b and shared, once each")
	for i := 2; i < len(digests); i++ {
		g.Expect(digests[i]).To(Equal(digests[i%2]))
	}
	g.Expect(digests[0]).NotTo(Equal(digests[1]))
}

func TestDigestCacheForgetsOldArtifacts(t *testing.T) {
	g := NewWithT(t)
	var c digestCache
	for i := range maxDigestCacheArtifacts + 1 {
		_, _ = c.get(context.Background(), fmt.Sprintf("old-%d\x00p", i), func() (string, error) { return "d", nil })
	}
	g.Expect(c.entries).To(HaveLen(maxDigestCacheArtifacts))
	g.Expect(c.entries).NotTo(HaveKey("old-0\x00p"))

	_, err := c.get(context.Background(), "x\x00p", func() (string, error) { return "", errors.New("boom") })
	g.Expect(err).To(HaveOccurred())
	d, err := c.get(context.Background(), "x\x00p", func() (string, error) { return "ok", nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal("ok"), "a failure is not remembered")
}

// BenchmarkProgramDigest50Stacks: one commit of a repository with 50 Stack
// folders (20 files each) and a shared folder (100 files), each Stack with
// include [shared/]; each iteration is a new store, so a cold cache.
func BenchmarkProgramDigest50Stacks(b *testing.B) {
	files := map[string]string{}
	for i := range 50 {
		for j := range 20 {
			files[fmt.Sprintf("stacks/s%02d/f%02d.yaml", i, j)] = fmt.Sprintf("%0512d", i*j)
		}
	}
	for j := range 100 {
		files[fmt.Sprintf("shared/f%03d.yaml", j)] = fmt.Sprintf("%01024d", j)
	}
	src := b.TempDir()
	writeTree(b, src, files)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		s := newStore(b)
		a, err := s.Put(ctx, src)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for i := range 50 {
			if _, err := s.ProgramDigest(ctx, a, fmt.Sprintf("stacks/s%02d", i), []string{"shared/"}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
