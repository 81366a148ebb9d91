package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestDriftReportAfterUp (issue 21, item 23): a check finds drift-second
// deleted (Drifted True, status.drift names it). A commit then changes the
// program, and its up (spec.refresh: true) creates drift-second again and
// updates drift-first. The drift report of the resources before the up does
// not outlive it: Drifted and status.drift are derived again by a check
// right after the up (not at the next scheduled check, an hour away), and
// say that nothing drifted.
func TestDriftReportAfterUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newDriftFixture(t, driftProgram(""))
	f.start(t)
	logOnFailure(t, f)
	stack := f.driftStack("reapplied", v1alpha1.DriftDetection{Mode: v1alpha1.DriftDetect}, func(s *v1alpha1.Stack) { s.Spec.Refresh = true })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	g.Expect(env.Client.Delete(ctx, configMapRef(f.ns, "drift-second"))).To(Succeed())
	s := driftCheck(t, key, nil)
	expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
	g.Expect(s.Status.Drift.Resources).To(HaveLen(1))
	g.Expect(s.Status.Drift.Resources[0].Name).To(Equal("second"))
	g.Expect(s.Status.Drift.NextCheckAt.Time).To(BeTemporally(">", time.Now().Add(30*time.Minute)), "the next scheduled check is far away")

	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": driftProgram("\n        d: \"4\"")}, "add d")
	requestReconcile(t, key)
	s = waitApplied(t, key, next)
	up := succeededUp(g, s, next)
	g.Expect(up.Changes.Create+up.Changes.Update).To(BeNumerically(">=", 2), "the up changed resources: %+v", up.Changes)
	g.Expect(configMapData(g, f.ns, "drift-second")).To(HaveKeyWithValue("x", "1"), "the up re-created it")
	g.Expect(configMapData(g, f.ns, "drift-first")).To(HaveKeyWithValue("d", "4"))

	g.Eventually(func(g Gomega) {
		s = getStack(g, key)
		d := s.Status.Drift
		g.Expect(d).NotTo(BeNil())
		g.Expect(d.CheckedAt).NotTo(BeNil())
		g.Expect(d.CheckedAt.Time).NotTo(BeTemporally("<", up.FinishedAt.Time.Truncate(time.Second)), "a check after the up derived the report again; Drifted: %s", driftedMessage(s))
		expectDrifted(g, s, metav1.ConditionFalse, v1alpha1.NoDriftReason)
		g.Expect(d.Resources).To(BeEmpty())
		g.Expect(d.Revision).To(HaveSuffix(next))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(metric(t, f, "stackpilot_stack_drifted", `name="reapplied"`)).To(Equal(0.0))
}
