package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// heldNamespace makes namespace name, which the test can delete to make it
// refuse new objects at once: it stays Terminating (its finalizer is the
// test's) until the test ends.
func heldNamespace(t *testing.T, name string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{"stackpilot.dev/e2e-hold"}}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		_ = env.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, release)
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return ns
}

// TestRemediateStopsWhenModeChanges (issue 21, item 14): a remediate that
// cannot succeed (the drifted ConfigMap was deleted in a namespace that now
// refuses new objects) is retried with backoff while the mode is
// Remediate; once spec.driftDetection.mode is set to Detect it is not
// retried again: the Stack is Ready at its applied revision, no failure is
// left, the drift stays reported, and no further remediate runs.
func TestRemediateStopsWhenModeChanges(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	aux := heldNamespace(t, f.ns+"-rem")
	good := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": auxProgram(aux.Name, "kept")}, "aux")
	f.start(t)
	logOnFailure(t, f)
	stack := f.driftStack("remediating", v1alpha1.DriftDetection{Mode: v1alpha1.DriftRemediate})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, good)

	// Drift the remediate cannot repair: the ConfigMap is gone, and its
	// namespace refuses to have it created again.
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: aux.Name, Name: "kept"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, aux)).To(Succeed())
	requestDriftCheck(t, key, nil)
	g.Eventually(func(g Gomega) {
		g.Expect(f.ctrl.Operations(t, "remediate")).To(BeNumerically(">=", 2), "the failed remediate is retried")
		s := getStack(g, key)
		g.Expect(s.Status.Failures).To(BeNumerically(">=", 1))
		g.Expect(records(s, v1alpha1.OperationRemediate)).NotTo(BeEmpty())
		g.Expect(records(s, v1alpha1.OperationRemediate)[0].Outcome).To(Equal(v1alpha1.OutcomeFailed))
	}, 4*time.Minute, time.Second).Should(Succeed())
	g.Expect(readyMessage(getStack(g, key))).To(ContainSubstring("being terminated"), "the remediate's own error")

	// Remediation off: the failing remediate stops.
	patchStack(t, key, map[string]any{"spec": map[string]any{"driftDetection": map[string]any{"mode": v1alpha1.DriftDetect}}})
	s := waitApplied(t, key, good)
	g.Expect(s.Status.Failures).To(BeZero(), "no failure left to back off from")
	expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
	g.Expect(s.Status.Drift.Resources).NotTo(BeEmpty(), "the drift stays reported")
	g.Eventually(func() []string { return stackEvents(t, f.ns, key.Name) }, time.Minute, time.Second).
		Should(ContainElement(ContainSubstring("is not retried: spec.driftDetection.mode is Detect")))

	// No remediate runs any more: well past the backoff the retries had
	// reached (spec.retryInterval 2 s, doubled per failure).
	remediates, ups := f.ctrl.Operations(t, "remediate"), f.ctrl.Operations(t, "up")
	history := applyRecords(getStack(g, key))
	g.Consistently(func(g Gomega) {
		g.Expect(f.ctrl.Operations(t, "remediate")).To(Equal(remediates))
		g.Expect(applyRecords(getStack(g, key))).To(Equal(history))
	}, 30*time.Second, time.Second).Should(Succeed())
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups), "nor an up in its place")
}
