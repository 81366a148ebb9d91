package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
)

func TestAdoptProgramDigest(t *testing.T) {
	legacy := v1alpha1.StackStatus{
		LastAppliedRevision: "main@sha1:a", InputsDigest: "i",
		LastAttemptedRevision: "main@sha1:a", LastAttemptedInputsDigest: "i",
	}
	tests := []struct {
		name               string
		status             v1alpha1.StackStatus
		revision, inputs   string
		applied, attempted string
	}{
		{name: "applied at this revision and inputs", status: legacy, revision: "main@sha1:a", inputs: "i", applied: "p", attempted: "p"},
		{name: "a new revision since", status: legacy, revision: "main@sha1:b", inputs: "i"},
		{name: "new inputs since", status: legacy, revision: "main@sha1:a", inputs: "j"},
		{name: "never applied", status: v1alpha1.StackStatus{}, revision: "", inputs: ""},
		{name: "failing at this revision", status: v1alpha1.StackStatus{
			LastAppliedRevision: "main@sha1:0", InputsDigest: "i", LastAttemptedRevision: "main@sha1:a", LastAttemptedInputsDigest: "i",
		}, revision: "main@sha1:a", inputs: "i", attempted: "p"},
		{name: "recorded already", status: v1alpha1.StackStatus{
			LastAppliedRevision: "main@sha1:a", InputsDigest: "i", LastAppliedProgramDigest: "old",
			LastAttemptedRevision: "main@sha1:a", LastAttemptedInputsDigest: "i", LastAttemptedProgramDigest: "old",
		}, revision: "main@sha1:a", inputs: "i", applied: "old", attempted: "old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := tt.status
			adoptProgramDigest(&s, tt.revision, tt.inputs, "p")
			g.Expect(s.LastAppliedProgramDigest).To(Equal(tt.applied))
			g.Expect(s.LastAttemptedProgramDigest).To(Equal(tt.attempted))
		})
	}
}

// At the revision and inputs of the last attempt or of the applied up, the
// recorded digest is used: nothing is fetched (the reconciler here has no
// source to fetch from).
func TestResolveProgramFetchesNothingForAKnownRevision(t *testing.T) {
	r := &StackReconciler{}
	status := v1alpha1.StackStatus{
		LastAppliedRevision: "main@sha1:a", InputsDigest: "i", LastAppliedProgramDigest: "pa",
		LastAttemptedRevision: "main@sha1:b", LastAttemptedInputsDigest: "i", LastAttemptedProgramDigest: "pb",
	}
	for rev, want := range map[string]string{"main@sha1:a": "pa", "main@sha1:b": "pb"} {
		g := NewWithT(t)
		st := &reconcileState{stack: &v1alpha1.Stack{Status: status}, revision: rev, inputs: &inputs{Digest: "i"}}
		res, err := r.resolveProgram(context.Background(), st)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(stepContinue))
		g.Expect(st.programDigest).To(Equal(want))
	}
}

func TestProgramPathsAndAppliedMessage(t *testing.T) {
	g := NewWithT(t)
	stack := &v1alpha1.Stack{}
	stack.Spec.Source.Git = &v1alpha1.GitSource{URL: "https://example.com/r", Include: []string{"shared/", "lib.yaml"}}
	g.Expect(programPaths(stack)).To(Equal("the repository"))
	stack.Spec.Source.Dir = "./a/"
	g.Expect(programPaths(stack)).To(Equal("a/, shared/, lib.yaml"))

	stack.Status.LastAppliedRevision = "main@sha1:b"
	g.Expect(appliedMessage(stack)).To(Equal("Applied revision main@sha1:b"))
	stack.Status.History = []v1alpha1.OperationRecord{{Outcome: v1alpha1.OutcomeSkipped, Revision: "main@sha1:b"}}
	g.Expect(appliedMessage(stack)).To(Equal("Applied revision main@sha1:b: no change under a/, shared/, lib.yaml in it"))
	stack.Status.LastAppliedRevision = "main@sha1:c"
	g.Expect(appliedMessage(stack)).To(Equal("Applied revision main@sha1:c"))
}

func TestProgramDigestErrorSaysWhatToFix(t *testing.T) {
	g := NewWithT(t)
	err := programDigestError("main@sha1:abc", fmt.Errorf("wrapped: %w", &artifact.MissingPathError{Path: "shared/"}))
	var stall *StallingError
	g.Expect(errors.As(err, &stall)).To(BeTrue())
	g.Expect(stall.Revision).To(Equal("main@sha1:abc"), "stalled for this revision only")
	g.Expect(err.Error()).To(Equal(`spec.source.git.include "shared/" is not in revision main@sha1:abc: commit it, or remove it from spec.source.git.include (checked again every spec.interval)`))

	err = programDigestError("main@sha1:abc", &artifact.UnsafePathError{Path: "a/link", Reason: "symbolic link points outside the tree"})
	g.Expect(errors.As(err, &stall)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring(`"a/link"`))

	err = programDigestError("main@sha1:abc", context.Canceled)
	g.Expect(errors.As(err, &stall)).To(BeFalse(), "anything else is retried")
}

// A Stack applied before program digests were recorded, whose branch moved on
// by a commit elsewhere: the digest of the tree it applied is adopted from the
// cache, and decide skips the new commit instead of running an up.
func TestAdoptFromArtifacts(t *testing.T) {
	ctx := context.Background()
	store, err := artifact.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(files map[string]string) artifact.Artifact {
		dir := t.TempDir()
		for name, content := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a, err := store.Put(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	old := put(map[string]string{"a/Pulumi.yaml": "name: a", "shared/x": "1", "b/Pulumi.yaml": "name: b"})
	now := put(map[string]string{"a/Pulumi.yaml": "name: a", "shared/x": "1", "b/Pulumi.yaml": "name: b2"})
	legacy := func() *v1alpha1.Stack {
		s := &v1alpha1.Stack{}
		s.Spec.Source = v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://example.com/r", Include: []string{"shared/"}}, Dir: "a"}
		ref := &v1alpha1.ArtifactReference{Revision: "main@sha1:old", Digest: old.Digest}
		s.Status = v1alpha1.StackStatus{
			LastAppliedRevision: "main@sha1:old", InputsDigest: "i", LastAppliedArtifact: ref,
			LastAttemptedRevision: "main@sha1:old", LastAttemptedInputsDigest: "i", LastAttemptedArtifact: ref,
		}
		return s
	}

	g := NewWithT(t)
	stack := legacy()
	adoptFromArtifacts(ctx, store, stack, "i")
	want, err := programDigest(ctx, store, stack, old)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stack.Status.LastAppliedProgramDigest).To(Equal(want))
	g.Expect(stack.Status.LastAttemptedProgramDigest).To(Equal(want))
	current, err := programDigest(ctx, store, stack, now)
	g.Expect(err).NotTo(HaveOccurred())
	d := decide(decideInput{
		Revision: "main@sha1:new", ProgramDigest: current, InputsDigest: "i",
		LastAppliedRevision: stack.Status.LastAppliedRevision, LastAppliedProgramDigest: stack.Status.LastAppliedProgramDigest,
		LastAppliedInputsDigest: "i", LastAttemptedProgramDigest: stack.Status.LastAttemptedProgramDigest, LastAttemptedInputsDigest: "i",
	})
	g.Expect(d.Action).To(Equal(ActionSkip), d.Why)

	stack = legacy()
	adoptFromArtifacts(ctx, store, stack, "j")
	g.Expect(stack.Status.LastAppliedProgramDigest).To(BeEmpty(), "new inputs: the tree may have been used with another dir")

	stack = legacy()
	stack.Status.LastAppliedArtifact = &v1alpha1.ArtifactReference{Revision: "main@sha1:old", Digest: "sha256:" + strings.Repeat("0", 64)}
	adoptFromArtifacts(ctx, store, stack, "i")
	g.Expect(stack.Status.LastAppliedProgramDigest).To(BeEmpty(), "the tree is no longer cached")
	g.Expect(stack.Status.LastAttemptedProgramDigest).To(Equal(want))
}
