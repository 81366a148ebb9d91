package stack

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestInterruptedDriftCheckIsNoFailedAttempt: a drift check that a dead
// controller left unfinished is recorded interrupted, but it is not a
// failed attempt: the failure count, Ready and the decision stay those of
// the last apply (an interrupted up runs again; an interrupted check must
// not start an up).
func TestInterruptedDriftCheckIsNoFailedAttempt(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	upDone := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	up := v1alpha1.OperationRecord{ID: "up-1", Type: v1alpha1.OperationUp, Revision: "main@sha1:a",
		StartedAt: upDone, FinishedAt: &upDone, Outcome: v1alpha1.OutcomeSucceeded}
	check := v1alpha1.OperationRecord{ID: "drift-check-1", Type: v1alpha1.OperationDriftCheck, Revision: "main@sha1:a",
		StartedAt: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second)), Outcome: v1alpha1.OutcomeRunning, Host: "ctrl-a"}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: "infra", UID: "u-1"}}
	stack.Status.CurrentOperation = check.DeepCopy()
	stack.Status.History = []v1alpha1.OperationRecord{check, up}
	conditions.MarkTrue(stack, v1alpha1.ReadyCondition, v1alpha1.SucceededReason, "Applied revision main@sha1:a")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack).WithStatusSubresource(stack).Build()
	r := &StackReconciler{Client: c, APIReader: c, Host: "ctrl-b"}

	st := stateOf(r, stack)
	_, err := r.recoverInterrupted(context.Background(), st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.stack.Status.CurrentOperation).To(BeNil())
	g.Expect(st.stack.Status.History[0].ID).To(Equal("drift-check-1"))
	g.Expect(st.stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
	g.Expect(st.stack.Status.Failures).To(BeZero(), "a check is not an attempt")
	g.Expect(st.recovered).To(BeNil(), "decide must not run the up again")
	g.Expect(conditions.IsTrue(st.stack, v1alpha1.ReadyCondition)).To(BeTrue(), "Ready is about the last apply")
	g.Expect(lastInterrupted(st.stack)).To(BeFalse(), "the newest attempt is the up, which succeeded")
	g.Expect(lastAttemptFinished(st.stack)).To(Equal(upDone.Time), "the backoff clock is the up's")
}

func TestDriftMessage(t *testing.T) {
	g := NewWithT(t)
	g.Expect(driftMessage(&v1alpha1.DriftStatus{Revision: "main@sha1:a"})).To(Equal("no drift at revision main@sha1:a"))
	var rs []v1alpha1.DriftedResource
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		rs = append(rs, v1alpha1.DriftedResource{Name: n, Op: "update", Properties: []string{"data.x"}})
	}
	rs[1].Op, rs[1].Properties = "delete", nil
	rs[2].Properties = []string{"data.1", "data.2", "data.3", "data.4", "data.5"}
	g.Expect(driftMessage(&v1alpha1.DriftStatus{Total: 9, Resources: rs})).To(Equal(
		"9 resource(s) drifted: a (data.x), b (deleted), c (data.1, data.2, data.3, +2), d (data.x), e (data.x) and 2 more"))
}

func TestSameDrift(t *testing.T) {
	g := NewWithT(t)
	a := []v1alpha1.DriftedResource{{URN: "u1", Op: "update", Properties: []string{"data.a"}}}
	g.Expect(sameDrift(a, []v1alpha1.DriftedResource{{URN: "u1", Op: "update", Properties: []string{"data.a"}}})).To(BeTrue())
	g.Expect(sameDrift(a, []v1alpha1.DriftedResource{{URN: "u1", Op: "update", Properties: []string{"data.b"}}})).To(BeFalse())
	g.Expect(sameDrift(a, []v1alpha1.DriftedResource{{URN: "u1", Op: "delete"}})).To(BeFalse())
	g.Expect(sameDrift(a, nil)).To(BeFalse())
}
