package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestDriftRequestWithAnUpDueAndDisabled: a drift check asked for while an
// up is due runs right after that up, in the same reconcile (the request
// is handled then, so it must not be handled without its check); in mode
// Disabled a check asked for by hand runs, report-only, its report stays,
// and there is no schedule.
func TestDriftRequestWithAnUpDueAndDisabled(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newDriftFixture(t, driftProgram(""))
	f.start(t)
	logOnFailure(t, f)

	// Created with the request: the first apply is due, and goes first.
	stack := f.driftStack("asked", v1alpha1.DriftDetection{Mode: v1alpha1.DriftDisabled})
	value := v1alpha1.DriftCheckRequestPrefix + "at-creation"
	stack.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: value}
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitHandled(t, key, value)
	g.Expect(records(s, v1alpha1.OperationUp)).To(HaveLen(1), "the up ran: %+v", s.Status.History)
	g.Expect(records(s, v1alpha1.OperationDriftCheck)).To(HaveLen(1), "and the check after it: %+v", s.Status.History)
	g.Expect(s.Status.Drift).NotTo(BeNil())
	g.Expect(s.Status.Drift.CheckedAt).NotTo(BeNil())
	g.Expect(s.Status.Drift.Revision).To(Equal(s.Status.LastAppliedRevision))
	expectDrifted(g, s, metav1.ConditionFalse, v1alpha1.NoDriftReason)

	// Disabled: a manual check still reports drift, with no next check.
	patchObject(t, configMapRef(f.ns, "drift-first"), `{"data":{"b":"edited"}}`)
	s = driftCheck(t, key, nil)
	expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
	g.Expect(s.Status.Drift.Resources).To(HaveLen(1))
	g.Expect(s.Status.Drift.Resources[0].Properties).To(Equal([]string{"data.b"}))
	g.Expect(s.Status.Drift.NextCheckAt).To(BeNil(), "mode Disabled schedules nothing")
	g.Expect(configMapData(g, f.ns, "drift-first")).To(HaveKeyWithValue("b", "edited"), "report-only")

	// A later reconcile keeps the report.
	s = waitHandled(t, key, requestReconcile(t, key))
	expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
	g.Expect(s.Status.Drift.Total).To(BeNumerically("==", 1))
}
