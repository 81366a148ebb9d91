package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRunClaim: the first claim of a stack is written into its tags in the
// backend; an operation for another owner, a destroy included, changes
// nothing and reports the owner.
func TestRunClaim(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, "name: claimy\nruntime: yaml\noutputs:\n  x: 1\n")

	first := e.spec(OpUp)
	first.Claim = "team-a/first"
	g.Expect(e.run(first).Outcome).To(Equal(OutcomeSucceeded))
	tags := readTags(t, e.state, "claimy", "dev")
	g.Expect(tags).To(HaveKeyWithValue(OwnerTag, "team-a/first"))

	for _, typ := range []OperationType{OpUp, OpDestroy, OpOutputs} {
		spec := e.spec(typ)
		spec.Claim = "team-a/second"
		res := e.run(spec)
		g.Expect(res.Outcome).To(Equal(OutcomeConflict), string(typ))
		g.Expect(res.ErrorClass).To(Equal(ErrorClaimed), string(typ))
		g.Expect(res.ClaimedBy).To(Equal("team-a/first"))
		g.Expect(res.Message).To(ContainSubstring("claimed by Stack team-a/first"))
	}
	g.Expect(readTags(t, e.state, "claimy", "dev")).To(HaveKeyWithValue(OwnerTag, "team-a/first"), "the claim stays")
	out := e.spec(OpOutputs)
	out.Claim = "team-a/first"
	res := e.run(out)
	g.Expect(res.Outcome).To(Equal(OutcomeSucceeded))
	g.Expect(res.Outputs).To(HaveKey("x"), "the second's destroy did nothing")

	// The same Stack again, as after being deleted and recreated: its own.
	again := e.spec(OpUp)
	again.Claim = "team-a/first"
	g.Expect(e.run(again).Outcome).To(Equal(OutcomeSucceeded))
}

// readTags reads the DIY backend's tags file beside the stack's state.
func readTags(t *testing.T, state, project, stack string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, ".pulumi", "stacks", project, stack+".pulumi-tags"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tags map[string]string `json:"tags"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Tags
}
