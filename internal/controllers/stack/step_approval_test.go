package stack

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/plan/plantest"
)

func TestPlanOutdated(t *testing.T) {
	g := NewWithT(t)
	store, err := plan.NewStore(filepath.Join(t.TempDir(), "plans"))
	g.Expect(err).NotTo(HaveOccurred())
	r := &StackReconciler{Plans: store}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"}}
	plantest.Stored(t, store, stack.UID, "plan-2") // its mode is ""
	st := &reconcileState{stack: stack, revision: "main@sha1:b", programDigest: "sha256:p", inputs: &inputs{Digest: "hmac:i"}}
	p := func(rev, prog, in, id string) *v1alpha1.PendingPlan {
		return &v1alpha1.PendingPlan{ID: id, Revision: rev, ProgramDigest: prog, InputsDigest: in}
	}
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:q", "hmac:i", "plan-1"), v1alpha1.ApprovalManual)).To(Equal("the program changed"))
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:j", "plan-1"), v1alpha1.ApprovalManual)).To(Equal("the inputs changed"))
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:i", "plan-9"), v1alpha1.ApprovalManual)).To(ContainSubstring("files are not"))
	// plantest.Stored writes no mode: a plan of another mode than the Stack's now.
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:i", "plan-2"), v1alpha1.ApprovalManual)).To(ContainSubstring("spec.approval.mode is Manual now"))

	manual := &plan.Document{APIVersion: plan.APIVersion, ID: "plan-3", Namespace: "ns", Name: "web", Mode: v1alpha1.ApprovalManual}
	plantest.Put(t, store, stack.UID, manual)
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:i", "plan-3"), v1alpha1.ApprovalManual)).To(BeEmpty(), "the plan of the change at hand")
	// The monorepo rule: a commit elsewhere in the repository is a new
	// revision with the same program and inputs, and the plan still is the
	// plan of the change at hand.
	g.Expect(r.planOutdated(st, p("main@sha1:a", "sha256:p", "hmac:i", "plan-3"), v1alpha1.ApprovalManual)).To(BeEmpty(), "a new revision with the same program and inputs")
	g.Expect(r.planOutdated(st, p("main@sha1:a", "sha256:q", "hmac:i", "plan-3"), v1alpha1.ApprovalManual)).To(Equal("the program changed"))
}

func TestApprovalChangedPredicate(t *testing.T) {
	g := NewWithT(t)
	with := func(v string) *v1alpha1.Stack {
		s := &v1alpha1.Stack{}
		if v != "" {
			s.Annotations = map[string]string{v1alpha1.ApproveAnnotation: v}
		}
		return s
	}
	p := approvalChanged{}
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: with(""), ObjectNew: with("plan-1")})).To(BeTrue())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: with("plan-1"), ObjectNew: with("plan-2")})).To(BeTrue())
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: with("plan-1"), ObjectNew: with("plan-1")})).To(BeFalse())
}

func TestAppliedPlan(t *testing.T) {
	g := NewWithT(t)
	stack := &v1alpha1.Stack{Status: v1alpha1.StackStatus{History: []v1alpha1.OperationRecord{
		{Type: v1alpha1.OperationPreview, Plan: "plan-2"},
		{Type: v1alpha1.OperationUp, Plan: "plan-1"},
	}}}
	g.Expect(appliedPlan(stack, "plan-1")).To(BeTrue())
	g.Expect(appliedPlan(stack, "plan-2")).To(BeFalse(), "previewed, not applied: a stale approval")
}

// TestPlanFailedKeepsApproval: after the up of an approved plan fails (not
// because the plan is no longer valid), PlanPending no longer says that the
// plan waits for approval: the approval stands, the up is retried.
func TestPlanFailedKeepsApproval(t *testing.T) {
	g := NewWithT(t)
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"}}
	p := &v1alpha1.PendingPlan{ID: "plan-1", Revision: "main@sha1:b"}
	stack.Status.PendingPlan = p
	st := &reconcileState{stack: stack, approved: &approvedPlan{id: "plan-1", by: "alice"}}
	markAwaitingApproval(st, p, "")
	r := &StackReconciler{}

	r.planFailed(st, transient(v1alpha1.ProgramErrorReason, errors.New("boom")))
	c := conditions.Get(stack, v1alpha1.PlanPendingCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(planApprovedReason))
	g.Expect(c.Message).NotTo(ContainSubstring("waits for approval"))
	g.Expect(c.Message).To(ContainSubstring("approved by alice"))
	g.Expect(c.Message).To(ContainSubstring(v1alpha1.ProgramErrorReason))
	g.Expect(stack.Status.PendingPlan).To(Equal(p), "the approved plan stays, for the retry")
	g.Expect(approvedRetry(stack, "plan-1")).To(BeTrue(), "the retry announces no second approval")
	g.Expect(approvedRetry(stack, "plan-10")).To(BeFalse())
}
