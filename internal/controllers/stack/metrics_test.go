package stack

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestStackStateMetrics: ready is 1 only for Ready=True (not Unknown while an
// operation runs), suspended follows spec.suspend, and both series go with
// the Stack.
func TestStackStateMetrics(t *testing.T) {
	g := NewWithT(t)
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "metrics-ns", Name: "web"}}
	ready := func() float64 { return testutil.ToFloat64(stackReady.WithLabelValues("metrics-ns", "web")) }
	suspended := func() float64 { return testutil.ToFloat64(stackSuspended.WithLabelValues("metrics-ns", "web")) }

	conditions.MarkTrue(s, v1alpha1.ReadyCondition, "Succeeded", "ok")
	recordStackState(s)
	g.Expect(ready()).To(Equal(1.0))
	g.Expect(suspended()).To(Equal(0.0))

	conditions.MarkUnknown(s, v1alpha1.ReadyCondition, v1alpha1.ProgressingReason, "running")
	recordStackState(s)
	g.Expect(ready()).To(Equal(0.0))

	conditions.MarkFalse(s, v1alpha1.ReadyCondition, v1alpha1.OperationFailedReason, "failed")
	s.Spec.Suspend = true
	recordStackState(s)
	g.Expect(ready()).To(Equal(0.0))
	g.Expect(suspended()).To(Equal(1.0))

	forgetStackMetrics("metrics-ns", "web")
	g.Expect(stackReady.DeleteLabelValues("metrics-ns", "web")).To(BeFalse(), "the ready series is gone")
	g.Expect(stackSuspended.DeleteLabelValues("metrics-ns", "web")).To(BeFalse(), "the suspended series is gone")
}
