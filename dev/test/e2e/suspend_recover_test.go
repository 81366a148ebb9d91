package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestSuspendAfterCrashRecovers (issue 21, item 22): the controller dies
// mid-up, and the Stack is suspended before a controller is back. The new
// controller records the up as interrupted and runs nothing: no phantom
// "Running up…" operation stays in status for as long as it is suspended.
func TestSuspendAfterCrashRecovers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	// The ConfigMap is ready once labelled proceed=yes, a label the program
	// sets from config: "no" makes the up wait, holding the lock.
	program := replaceOnce(bridgeProgram("\n        size: gated"), "config:\n", "config:\n  proceed:\n    type: string\n    default: \"yes\"\n")
	program = replaceOnce(program, "        name: app-settings\n", "        name: app-settings\n        labels:\n          proceed: ${proceed}\n"+
		"        annotations:\n          pulumi.com/waitFor: \"jsonpath={.metadata.labels.proceed}=yes\"\n")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": program}, "gated by config")
	f.start(t)
	logOnFailure(t, f)
	stack := f.stack("frozen", func(s *v1alpha1.Stack) { s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, next)
	locks := filepath.Join(f.dataDir, "state", f.ns, ".pulumi", "locks", "organization", "bridge", "frozen", "*.json")

	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"config":{"proceed":"no"}}}`)))).To(Succeed())
	var opID string
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.CurrentOperation).NotTo(BeNil())
		opID = s.Status.CurrentOperation.ID
		m, _ := filepath.Glob(locks)
		g.Expect(m).NotTo(BeEmpty(), "Pulumi holds the lock")
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	f.ctrl.Kill()

	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
	f.start(t)
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.CurrentOperation).To(BeNil(), "no phantom operation")
		g.Expect(s.Status.History[0].ID).To(Equal(opID))
		g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
		ready := conditions.Get(s, v1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).NotTo(Equal(metav1.ConditionUnknown), "Ready: %s", readyMessage(s))
		g.Expect(ready.Reason).To(Equal(v1alpha1.InterruptedReason), "Ready: %s", readyMessage(s))
		g.Expect(conditions.Has(s, v1alpha1.ReconcilingCondition)).To(BeFalse(), "suspended: nothing in progress")
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Consistently(func() int { return f.ctrl.Operations(t, "") }, 5*time.Second, time.Second).Should(BeZero(),
		"a suspended Stack runs nothing")

	// Resumed with the inputs fixed, it applies (clearing the dead run's lock).
	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false,"config":{"proceed":"yes"}}}`)))).To(Succeed())
	s := waitApplied(t, key, next)
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
}
