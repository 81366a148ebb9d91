package stack

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

func driftedStack(mode v1alpha1.DriftMode) *v1alpha1.Stack {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: v1alpha1.StackSpec{DriftDetection: &v1alpha1.DriftDetection{Mode: mode}}}
	later := metav1.NewTime(time.Now().Add(time.Hour))
	s.Status.Drift = &v1alpha1.DriftStatus{Total: 1, NextCheckAt: &later,
		Resources: []v1alpha1.DriftedResource{{URN: "urn:x", Name: "cfg", Op: "update"}}}
	conditions.MarkTrue(s, v1alpha1.DriftedCondition, v1alpha1.DriftDetectedReason, "1 resource(s) drifted: cfg")
	return s
}

func TestDriftAfterApply(t *testing.T) {
	r := &StackReconciler{}
	changed := &runner.Result{Changes: runner.ChangeCounts{Update: 1, Same: 3}}

	t.Run("an up that changed resources makes the report stale and the check due", func(t *testing.T) {
		g := NewWithT(t)
		s := driftedStack(v1alpha1.DriftDetect)
		r.driftAfterApply(&reconcileState{stack: s}, changed, "main@sha1:b")
		c := conditions.Get(s, v1alpha1.DriftedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(c.Reason).To(Equal(DriftOutdatedReason))
		g.Expect(c.Message).To(ContainSubstring("the up of revision main@sha1:b changed 1 resource(s)"))
		g.Expect(s.Status.Drift.Resources).To(BeEmpty())
		g.Expect(s.Status.Drift.Total).To(BeZero())
		g.Expect(s.Status.Drift.NextCheckAt.Time).To(BeTemporally("<=", time.Now()), "the check is due now")
	})
	t.Run("a rollback says so", func(t *testing.T) {
		g := NewWithT(t)
		s := driftedStack(v1alpha1.DriftRemediate)
		s.Status.History = []v1alpha1.OperationRecord{{Type: v1alpha1.OperationRollback}}
		r.driftAfterApply(&reconcileState{stack: s}, changed, "main@sha1:a")
		g.Expect(conditions.Get(s, v1alpha1.DriftedCondition).Message).To(ContainSubstring("the rollback of revision main@sha1:a"))
	})
	t.Run("Disabled: no schedule, the message says how to check", func(t *testing.T) {
		g := NewWithT(t)
		s := driftedStack(v1alpha1.DriftDisabled)
		r.driftAfterApply(&reconcileState{stack: s}, changed, "main@sha1:b")
		g.Expect(s.Status.Drift.NextCheckAt).To(BeNil())
		g.Expect(conditions.Get(s, v1alpha1.DriftedCondition).Message).To(ContainSubstring("stackpilot drift check web -n ns"))
	})
	t.Run("an up that changed nothing leaves the report", func(t *testing.T) {
		g := NewWithT(t)
		s := driftedStack(v1alpha1.DriftDetect)
		r.driftAfterApply(&reconcileState{stack: s}, &runner.Result{Changes: runner.ChangeCounts{Same: 4}}, "main@sha1:b")
		g.Expect(conditions.IsTrue(s, v1alpha1.DriftedCondition)).To(BeTrue())
		g.Expect(s.Status.Drift.Resources).To(HaveLen(1))
	})
	t.Run("no drift reported: nothing to forget", func(t *testing.T) {
		g := NewWithT(t)
		s := driftedStack(v1alpha1.DriftDetect)
		s.Status.Drift.Resources, s.Status.Drift.Total = nil, 0
		conditions.MarkFalse(s, v1alpha1.DriftedCondition, v1alpha1.NoDriftReason, "no drift")
		next := s.Status.Drift.NextCheckAt
		r.driftAfterApply(&reconcileState{stack: s}, changed, "main@sha1:b")
		g.Expect(conditions.GetReason(s, v1alpha1.DriftedCondition)).To(Equal(v1alpha1.NoDriftReason))
		g.Expect(s.Status.Drift.NextCheckAt).To(Equal(next))
	})
}
