package logstore

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestStoreKeepsTheLastOperationsBounded(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	s.SetLimits(3, 4096)
	base := time.Now().Add(-time.Hour)
	for i := range 5 {
		id := fmt.Sprintf("up-%d", i)
		path, err := s.Begin("uid-1", id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Running("uid-1", id)).To(BeTrue())
		text := fmt.Sprintf("first line of %d\n", i)
		if i == 4 {
			text += strings.Repeat("0123456789abcdef\n", 1000) + "last line\n"
		}
		g.Expect(os.WriteFile(path, []byte(text), 0o600)).To(Succeed())
		at := base.Add(time.Duration(i) * time.Minute)
		g.Expect(os.Chtimes(path, at, at)).To(Succeed())
		g.Expect(s.End("uid-1", id)).To(Succeed())
		g.Expect(s.Running("uid-1", id)).To(BeFalse())
	}
	ids, err := s.List("uid-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(Equal([]string{"up-4", "up-3", "up-2"}))
	g.Expect(s.Has("uid-1", "up-1")).To(BeFalse())

	f, err := s.Open("uid-1", "up-4")
	g.Expect(err).NotTo(HaveOccurred())
	b, _ := io.ReadAll(f)
	f.Close()
	g.Expect(len(b)).To(BeNumerically("<=", 4096))
	g.Expect(string(b)).To(HavePrefix("first line of 4\n"))
	g.Expect(string(b)).To(HaveSuffix("\nlast line\n"))
	g.Expect(string(b)).To(MatchRegexp(`\n… \d+ bytes omitted …\n0123456789abcdef\n`))

	g.Expect(s.RemoveStack("uid-1")).To(Succeed())
	ids, err = s.List("uid-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(BeEmpty())
}

func TestStoreRefusesPathsOutOfItsDir(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	for _, id := range []string{"../x", "a/b", "..", "", ".hidden"} {
		_, err := s.Begin("uid", id)
		g.Expect(err).To(HaveOccurred(), id)
		_, err = s.Open("uid", id)
		g.Expect(err).To(MatchError(ErrNotFound), id)
	}
}
