package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestPolicyRemediate: drift remediation runs under the policies too. A
// rule added after the apply refuses the remediate that would re-create a
// ConfigMap deleted by hand (the remediate fails with PolicyViolation, the
// ConfigMap stays gone); the policy deleted, the failing remediate runs
// again at once (its retry is an hour away) and re-creates it.
func TestPolicyRemediate(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newDriftFixture(t, driftProgram(""))
	f.start(t)
	logOnFailure(t, f)
	stack := f.driftStack("guarded-drift", v1alpha1.DriftDetection{Mode: v1alpha1.DriftRemediate})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)
	// From now on a failed attempt waits an hour for its retry: only the
	// policy's change can run the refused remediate again within the test.
	patchStack(t, key, map[string]any{"spec": map[string]any{"retryInterval": "1h"}})

	retire := &v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "retire-second", Namespace: f.ns},
		Spec: v1alpha1.StackPolicySpec{Rules: []v1alpha1.PolicyRule{{
			Name:       "retired",
			Match:      v1alpha1.PolicyMatch{Types: []string{configMapType}, Names: []string{"second"}},
			Expression: "false", Message: "ConfigMap second is retired",
		}}}}
	g.Expect(env.Client.Create(ctx, retire)).To(Succeed())

	// Drift: the ConfigMap "second" deleted by hand. Its remediate is refused.
	g.Expect(env.Client.Delete(ctx, configMapRef(f.ns, "drift-second"))).To(Succeed())
	driftCheck(t, key, nil)
	var refused v1alpha1.OperationRecord
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		rem := records(s, v1alpha1.OperationRemediate)
		g.Expect(rem).NotTo(BeEmpty(), "history: %+v", s.Status.History)
		g.Expect(rem[0].FinishedAt).NotTo(BeNil())
		refused = rem[0]
	}, 4*time.Minute, time.Second).Should(Succeed())
	g.Expect(refused.Outcome).To(Equal(v1alpha1.OutcomeFailed), "remediate: %+v", refused)
	g.Expect(refused.Reason).To(Equal(v1alpha1.PolicyViolationReason), "remediate: %+v", refused)
	g.Expect(refused.Message).To(ContainSubstring("StackPolicy/" + f.ns + "/retire-second/retired: ConfigMap second is retired"))
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(configMapRef(f.ns, "drift-second")), configMapRef(f.ns, "drift-second"))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused remediate re-created the ConfigMap")

	// The policy goes: the remediate runs again at once and repairs.
	g.Expect(env.Client.Delete(ctx, retire)).To(Succeed())
	requested := map[string]bool{}
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		retryOtherFailure(t, s, requested)
		rem := records(s, v1alpha1.OperationRemediate)
		g.Expect(rem).NotTo(BeEmpty())
		g.Expect(rem[0].ID).NotTo(Equal(refused.ID), "no remediate since the refused one")
		g.Expect(rem[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "remediate: %+v", rem[0])
	}, 4*time.Minute, time.Second).Should(Succeed())
	g.Expect(configMapData(g, f.ns, "drift-second")).To(Equal(map[string]string{"x": "1"}))
}

// retryOtherFailure requests a reconcile of a Stack whose newest attempt
// failed for a reason other than a policy (an API server that timed out
// under load, say), once per attempt. The tests that give a Stack an hour's
// retryInterval, so that only a policy's change can explain a prompt retry,
// must not wait that hour after a failure that has nothing to do with it;
// a Stack still stopped by the policy is never requested.
func retryOtherFailure(t *testing.T, s *v1alpha1.Stack, requested map[string]bool) {
	t.Helper()
	if s.Status.CurrentOperation != nil || len(s.Status.History) == 0 {
		return
	}
	h := s.Status.History[0]
	if h.FinishedAt == nil || h.Outcome != v1alpha1.OutcomeFailed || requested[h.ID] ||
		h.Reason == v1alpha1.PolicyViolationReason || h.Reason == v1alpha1.PolicyInvalidReason {
		return
	}
	requested[h.ID] = true
	t.Logf("%s failed for a reason that is no policy's; requesting a reconcile: %s", h.ID, h.Message)
	patchStack(t, client.ObjectKeyFromObject(s), map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.ReconcileRequestAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}}})
}
