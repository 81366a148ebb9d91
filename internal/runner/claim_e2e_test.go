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

// TestRunClaimHeldIsCheckedAgain (issue 21, item 16): through the CLI (the
// path of every backend but file://), a Stack that claimed and applied the
// stack has its claim read again at its next operation: when the tag names
// another Stack by then (the other's interleaved claim set it last), the
// operation changes nothing and reports the owner, although the controller
// says the claim is held.
//
// Not parallel: it sets readFileState, which every Run reads.
func TestRunClaimHeldIsCheckedAgain(t *testing.T) {
	g := NewWithT(t)
	readFileState = false
	defer func() { readFileState = true }()
	e := newE2E(t, "name: claimy\nruntime: yaml\noutputs:\n  x: 1\n")

	first := e.spec(OpUp)
	first.Claim = "team-a/first"
	g.Expect(e.run(first).Outcome).To(Equal(OutcomeSucceeded))
	// What the second Stack's claim, interleaved with the first's, leaves.
	writeTags(t, e.state, "claimy", "dev", map[string]string{OwnerTag: "team-a/second"})

	for _, typ := range []OperationType{OpUp, OpPreview, OpDriftCheck, OpOutputs} {
		again := e.spec(typ)
		again.Claim, again.ClaimHeld = "team-a/first", true
		res := e.run(again)
		g.Expect(res.Outcome).To(Equal(OutcomeConflict), "%s: %s", typ, res.Message)
		g.Expect(res.ErrorClass).To(Equal(ErrorClaimed), string(typ))
		g.Expect(res.ClaimedBy).To(Equal("team-a/second"), string(typ))
	}
	g.Expect(readTags(t, e.state, "claimy", "dev")).To(HaveKeyWithValue(OwnerTag, "team-a/second"), "the winner's claim stays")
}

// writeTags replaces the DIY backend's tags file beside the stack's state.
func writeTags(t *testing.T, state, project, stack string, tags map[string]string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"version": 1, "tags": tags})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, ".pulumi", "stacks", project, stack+".pulumi-tags"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
