package runner

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRunReview: a pull request's preview (Spec.Review) changes nothing in
// the backend. A stack with no state yet is previewed as an empty stack
// (everything to create) and is not created; an unclaimed stack is not
// claimed, and its checkpoint stays byte for byte; one claimed by another
// Stack is refused.
func TestRunReview(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, configProgram)
	config := []ConfigValue{
		{Key: "settings", Value: map[string]any{"name": "web", "tags": []any{"a"}}},
		{Key: "cfgtest:replicas", Value: 1},
		{Key: "token", Value: "t", Secret: true},
		{Key: "vault", Value: map[string]any{"port": 1}},
	}
	review := func() Spec {
		s := e.spec(OpPreview, config...)
		s.Review, s.Claim = true, "ns/web"
		return s
	}

	res := e.run(review())
	g.Expect(res.Outcome).To(Equal(OutcomeSucceeded), res.Message)
	g.Expect(res.Changes.Create).To(Equal(1), "previewed as a new stack")
	fs := openFileStack(e.state, "cfgtest", "dev")
	g.Expect(fs.exists()).To(BeFalse(), "a review created the stack")
	entries, _ := os.ReadDir(e.state)
	g.Expect(entries).To(BeEmpty(), "a review wrote into the real backend")

	// An up made by hand (no claim): the review claims nothing and leaves
	// the checkpoint as it was.
	up := e.run(e.spec(OpUp, config...))
	g.Expect(up.Outcome).To(Equal(OutcomeSucceeded), up.Message)
	before, err := os.ReadFile(fs.checkpointPath())
	g.Expect(err).NotTo(HaveOccurred())
	res = e.run(review())
	g.Expect(res.Outcome).To(Equal(OutcomeSucceeded), res.Message)
	g.Expect(res.Changes.Same).To(Equal(1))
	after, err := os.ReadFile(fs.checkpointPath())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(before))
	tags, err := fs.readTags()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).NotTo(HaveKey(OwnerTag), "a review took the claim")
	g.Expect(filepath.Glob(filepath.Join(e.state, ".pulumi", "locks", "*", "*", "*", "*"))).To(BeEmpty(), "a lock was left")

	// Claimed by another Stack: refused, as any operation is.
	g.Expect(fs.setTag(OwnerTag, ClaimValue("ns/other"))).To(Succeed())
	res = e.run(review())
	g.Expect(res.Outcome).To(Equal(OutcomeConflict))
	g.Expect(res.ClaimedBy).To(Equal(ClaimValue("ns/other")))

	// Only a preview may be a review.
	s := review()
	s.Type = OpUp
	g.Expect(e.run(s).ErrorClass).To(Equal(ErrorInternal))
}
