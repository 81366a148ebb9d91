package plan_test

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/plan/plantest"
)

func TestStore(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "plans")
	s, err := plan.NewStore(dir)
	g.Expect(err).NotTo(HaveOccurred())
	plantest.Stored(t, s, "uid-1", "plan-1")
	g.Expect(s.Has("uid-1", "plan-1")).To(BeTrue())
	g.Expect(s.PlanFile("uid-1", "plan-1")).To(BeAnExistingFile())
	doc, err := s.Document("uid-1", "plan-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doc.Resources).To(HaveLen(1))

	// A preview that saved no plan makes none; its staging dir is gone.
	_, err = s.Stage("uid-1", "plan-2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Commit("uid-1", &plan.Document{ID: "plan-2"})).To(MatchError(ContainSubstring("saved no update plan")))
	g.Expect(s.Has("uid-1", "plan-2")).To(BeFalse())
	left, _ := filepath.Glob(filepath.Join(dir, "uid-1", ".staging-*"))
	g.Expect(left).To(BeEmpty())

	// Ids that could name a path outside the store name no plan.
	for _, id := range []string{"../uid-1/plan-1", "..", "", "a/b"} {
		_, err := s.Document("uid-1", id)
		g.Expect(err).To(MatchError(plan.ErrNotFound), id)
		_, err = s.Stage("uid-1", id)
		g.Expect(err).To(HaveOccurred(), id)
	}

	g.Expect(s.Remove("uid-1", "plan-1")).To(Succeed())
	_, err = s.Document("uid-1", "plan-1")
	g.Expect(err).To(MatchError(plan.ErrNotFound))
	plantest.Stored(t, s, "uid-1", "plan-3")
	g.Expect(s.RemoveStack("uid-1")).To(Succeed())
	g.Expect(filepath.Join(dir, "uid-1")).NotTo(BeADirectory())
}
