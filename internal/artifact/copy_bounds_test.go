package artifact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestStoreBoundsCopies (issue 21, item 3): Put and CopyTree stop at the
// store's Limits, with a *LimitError naming the bound, instead of copying
// a tree of any size; the refused Put leaves nothing stored or staged.
func TestStoreBoundsCopies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newStore(t)
	many := map[string]string{"Pulumi.yaml": "name: x"}
	for i := range 30 {
		many[fmt.Sprintf("src/f%02d.txt", i)] = "x"
	}
	manyDir := t.TempDir()
	writeTree(t, manyDir, many)
	bigDir := t.TempDir()
	writeTree(t, bigDir, map[string]string{"Pulumi.yaml": "name: x", "big.bin": strings.Repeat("b", 64<<10)})
	unbounded, err := s.Put(ctx, manyDir)
	g.Expect(err).NotTo(HaveOccurred())
	bigArt, err := s.Put(ctx, bigDir)
	g.Expect(err).NotTo(HaveOccurred())

	s.Limits = Limits{MaxFiles: 10, MaxBytes: 16 << 10}
	for name, c := range map[string]struct {
		dir, limit string
	}{"many": {manyDir, "file count"}, "big": {bigDir, "size"}} {
		fresh := newStore(t)
		fresh.Limits = s.Limits
		_, err := fresh.Put(ctx, c.dir)
		var le *LimitError
		g.Expect(errors.As(err, &le)).To(BeTrue(), "%s: want a LimitError, got %v", name, err)
		g.Expect(le.Limit).To(Equal(c.limit))
		g.Expect(err.Error()).To(ContainSubstring("tree exceeds the " + c.limit + " limit"))
		for _, sub := range []string{"sha256", "tmp"} {
			entries, err := os.ReadDir(filepath.Join(fresh.Root(), sub))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(entries).To(BeEmpty(), "%s: %s", name, sub)
		}
	}
	for name, a := range map[string]Artifact{"file count": unbounded, "size": bigArt} {
		err := s.CopyTree(ctx, a, "", filepath.Join(t.TempDir(), "work"))
		var le *LimitError
		g.Expect(errors.As(err, &le)).To(BeTrue(), "CopyTree %s: want a LimitError, got %v", name, err)
		g.Expect(le.Limit).To(Equal(name))
	}
}
