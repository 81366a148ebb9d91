package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestPlanFinalize(t *testing.T) {
	applied := &v1alpha1.ArtifactReference{Revision: "main@sha1:a", Digest: "sha256:a"}
	attempted := &v1alpha1.ArtifactReference{Revision: "main@sha1:b", Digest: "sha256:b"}
	for _, tc := range []struct {
		name string
		in   finalizeInput
		want *v1alpha1.ArtifactReference // nil: no destroy
	}{
		{"applied: destroy with the applied program", finalizeInput{DestroyOnDelete: true, Applied: applied, Attempted: attempted}, applied},
		{"first up failed part-way: destroy with the attempted program", finalizeInput{DestroyOnDelete: true, Attempted: attempted}, attempted},
		{"never attempted: nothing to destroy", finalizeInput{DestroyOnDelete: true}, nil},
		{"destroyOnDelete false: the stack stays", finalizeInput{Applied: applied, Attempted: attempted}, nil},
		{"claimed by another Stack: never destroyed", finalizeInput{DestroyOnDelete: true, Attempted: attempted, Claimed: true}, nil},
		{"applied, then claimed away: ours to destroy (the runner refuses if it is not)", finalizeInput{DestroyOnDelete: true, Applied: applied, Claimed: true}, applied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			plan := planFinalize(tc.in)
			g.Expect(plan.Destroy).To(Equal(tc.want))
			if tc.want == nil {
				g.Expect(plan.Note).NotTo(BeEmpty(), "says why nothing is destroyed")
			}
		})
	}
}

func TestFinalizeInputOf(t *testing.T) {
	g := NewWithT(t)
	done := metav1.Now()
	stack := &v1alpha1.Stack{Spec: v1alpha1.StackSpec{DestroyOnDelete: true}}
	stack.Status.LastAttemptedArtifact = &v1alpha1.ArtifactReference{Revision: "r", Digest: "d"}
	stack.Status.History = []v1alpha1.OperationRecord{
		{Type: v1alpha1.OperationUp, Outcome: v1alpha1.OutcomeConflict, Reason: v1alpha1.StackClaimedReason, FinishedAt: &done},
	}
	in := finalizeInputOf(stack)
	g.Expect(in.Claimed).To(BeTrue())
	g.Expect(planFinalize(in).Destroy).To(BeNil())

	// An up that failed part-way after the claim was ours.
	stack.Status.History = append([]v1alpha1.OperationRecord{
		{Type: v1alpha1.OperationUp, Outcome: v1alpha1.OutcomeFailed, Reason: v1alpha1.ProgramErrorReason, FinishedAt: &done},
	}, stack.Status.History...)
	in = finalizeInputOf(stack)
	g.Expect(in.Claimed).To(BeFalse())
	g.Expect(planFinalize(in).Destroy).To(Equal(stack.Status.LastAttemptedArtifact))
}

func TestAfterDestroyFailure(t *testing.T) {
	for _, tc := range []struct {
		name          string
		reason        string
		namespaceGone bool
		want          afterFailure
	}{
		{"a failed destroy is retried", v1alpha1.ProgramErrorReason, false, retryDestroy},
		{"inputs missing, namespace stays: wait for them", v1alpha1.InputsNotFoundReason, false, retryDestroy},
		{"inputs gone with the namespace: let go", v1alpha1.InputsNotFoundReason, true, releaseNamespaceGone},
		{"the stack is another Stack's: let go", v1alpha1.StackClaimedReason, false, releaseClaimed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(afterDestroyFailure(tc.reason, tc.namespaceGone)).To(Equal(tc.want))
		})
	}
}
