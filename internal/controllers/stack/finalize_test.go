package stack

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
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

// TestDestroyRetryWait (issue 21, item 24): a failed destroy of a deleted
// Stack backs off like other failures, doubling per failure in a row; a
// reconcile request or a spec change retries at once.
func TestDestroyRetryWait(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	failed := func(ago time.Duration) v1alpha1.OperationRecord {
		at := metav1.NewTime(now.Add(-ago))
		return v1alpha1.OperationRecord{Type: v1alpha1.OperationDestroy, Outcome: v1alpha1.OutcomeFailed, FinishedAt: &at}
	}
	stack := func(history ...v1alpha1.OperationRecord) *v1alpha1.Stack {
		s := &v1alpha1.Stack{}
		s.Generation = 3
		s.Spec.RetryInterval = &metav1.Duration{Duration: time.Minute}
		s.Spec.Interval = metav1.Duration{Duration: time.Hour}
		s.Status.History = history
		conditions.MarkFalse(s, v1alpha1.ReadyCondition, v1alpha1.DestroyFailedReason, "destroy failed")
		return s
	}
	g := NewWithT(t)
	g.Expect(destroyRetryWait(stack(failed(10*time.Second)), now)).To(Equal(50*time.Second), "retryInterval after the first")
	g.Expect(destroyRetryWait(stack(failed(10*time.Second), failed(time.Minute)), now)).To(Equal(110*time.Second), "doubled after the second")
	g.Expect(destroyRetryWait(stack(failed(3*time.Minute), failed(5*time.Minute)), now)).To(BeZero(), "due")
	running := v1alpha1.OperationRecord{Type: v1alpha1.OperationDestroy, Outcome: v1alpha1.OutcomeRunning}
	g.Expect(destroyRetryWait(stack(running, failed(10*time.Second)), now)).To(Equal(50 * time.Second))
	up := failed(time.Second)
	up.Type = v1alpha1.OperationUp
	g.Expect(destroyRetryWait(stack(up), now)).To(BeZero(), "no failed destroy yet")
	g.Expect(failedDestroys(stack(failed(time.Second), up, failed(time.Hour)))).To(Equal(int64(1)), "in a row only")

	requested := stack(failed(10 * time.Second))
	requested.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "now"}
	g.Expect(destroyRetryWait(requested, now)).To(BeZero(), "a reconcile request retries at once")
	changed := stack(failed(10 * time.Second))
	changed.Generation++
	g.Expect(destroyRetryWait(changed, now)).To(BeZero(), "so does a spec change")
}
