package controller

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

func TestPlanOutdated(t *testing.T) {
	g := NewWithT(t)
	store, err := NewPlanStore(filepath.Join(t.TempDir(), "plans"))
	g.Expect(err).NotTo(HaveOccurred())
	r := &StackReconciler{Plans: store}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"}}
	storedPlan(t, store, stack.UID, "plan-2") // its mode is ""
	st := &reconcileState{stack: stack, revision: "main@sha1:b", programDigest: "sha256:p", inputs: &inputs{Digest: "hmac:i"}}
	p := func(rev, prog, in, id string) *v1alpha1.PendingPlan {
		return &v1alpha1.PendingPlan{ID: id, Revision: rev, ProgramDigest: prog, InputsDigest: in}
	}
	g.Expect(r.planOutdated(st, p("main@sha1:a", "sha256:p", "hmac:i", "plan-1"), v1alpha1.ApprovalManual)).To(ContainSubstring("revision main@sha1:b"))
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:q", "hmac:i", "plan-1"), v1alpha1.ApprovalManual)).To(Equal("the program changed"))
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:j", "plan-1"), v1alpha1.ApprovalManual)).To(Equal("the inputs changed"))
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:i", "plan-9"), v1alpha1.ApprovalManual)).To(ContainSubstring("files are not"))
	// storedPlan writes no mode: a plan of another mode than the Stack's now.
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:i", "plan-2"), v1alpha1.ApprovalManual)).To(ContainSubstring("spec.approval.mode is Manual now"))

	manual := &plan.Document{APIVersion: plan.APIVersion, ID: "plan-3", Namespace: "ns", Name: "web", Mode: v1alpha1.ApprovalManual}
	file, err := store.Stage(stack.UID, "plan-3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(writeFile(file)).To(Succeed())
	g.Expect(store.Commit(stack.UID, manual)).To(Succeed())
	g.Expect(r.planOutdated(st, p("main@sha1:b", "sha256:p", "hmac:i", "plan-3"), v1alpha1.ApprovalManual)).To(BeEmpty(), "the plan of the change at hand")
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
