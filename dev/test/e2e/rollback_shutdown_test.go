package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// waitingOn is the bridge program whose app-settings is ready only once it
// carries the label label=yes; timeout, when set, bounds that wait.
func waitingOn(label, timeout string) string {
	p := replaceOnce(bridgeProgram(""), "        name: app-settings\n",
		"        name: app-settings\n        annotations:\n          pulumi.com/waitFor: \"jsonpath={.metadata.labels."+label+"}=yes\"\n")
	if timeout != "" {
		p = replaceOnce(p, "      deleteBeforeReplace: true\n", "      deleteBeforeReplace: true\n      customTimeouts:\n        update: "+timeout+"\n")
	}
	return p
}

// labelAppSettings sets (value "yes") or removes (value "") a label on
// app-settings, as a person or another controller would.
func labelAppSettings(t *testing.T, ns, label, value string) {
	t.Helper()
	patch := `{"metadata":{"labels":{"` + label + `":null}}}`
	if value != "" {
		patch = `{"metadata":{"labels":{"` + label + `":"` + value + `"}}}`
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-settings"}}
	if err := env.Client.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestRollbackCutShortByShutdownRunsAgain: a controller rollout (SIGTERM)
// cuts a rollback short. That is no failed rollback: status.rollback says
// Interrupted, Ready is Unknown (Interrupted), the failed change stays the
// attempted one with its failure count, and the next controller runs the
// rollback again, which then rolls back.
func TestRollbackCutShortByShutdownRunsAgain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const grace = 30 * time.Second
	f := newFixture(t)
	good := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": waitingOn("proceed", "")}, "waits for proceed")
	f.start(t, "--graceful-shutdown-timeout="+grace.String())
	logOnFailure(t, f)
	stack := f.rollbackStack("cutshort", func(s *v1alpha1.Stack) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	g.Eventually(func(g Gomega) { configMapData(g, f.ns, "app-settings") }, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	labelAppSettings(t, f.ns, "proceed", "yes")
	waitApplied(t, key, good)
	// From now on a rollback to the good revision waits until proceed=yes again.
	labelAppSettings(t, f.ns, "proceed", "")

	// The bad change waits for a label nobody sets, for 20 s: it fails, and
	// the rollback follows at once and waits on proceed.
	bad := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": waitingOn("never", "20s")}, "waits for never")
	requestReconcile(t, key)
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.CurrentOperation).NotTo(BeNil())
		g.Expect(s.Status.CurrentOperation.Type).To(Equal(v1alpha1.OperationRollback))
		var cm corev1.ConfigMap
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &cm)).To(Succeed())
		g.Expect(cm.Annotations).To(HaveKeyWithValue("pulumi.com/waitFor", "jsonpath={.metadata.labels.proceed}=yes"),
			"the rollback has put the good revision's ConfigMap back and waits on it")
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())

	g.Expect(syscall.Kill(f.ctrl.Pid(), syscall.SIGTERM)).To(Succeed())
	g.Eventually(f.ctrl.Exited(), grace+20*time.Second).Should(BeClosed())

	s := getStack(g, key)
	g.Expect(s.Status.CurrentOperation).To(BeNil(), "the end of the rollback was recorded")
	g.Expect(s.Status.History[0].Type).To(Equal(v1alpha1.OperationRollback))
	g.Expect(s.Status.History[0].Reason).To(Equal(v1alpha1.InterruptedReason), "%+v", s.Status.History[0])
	g.Expect(s.Status.Rollback).NotTo(BeNil())
	g.Expect(s.Status.Rollback.Outcome).To(Equal(v1alpha1.OutcomeInterrupted), "not a failed rollback")
	ready := conditions.Get(s, v1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionUnknown), "Ready: %s", readyMessage(s))
	g.Expect(ready.Reason).To(Equal(v1alpha1.InterruptedReason), "Ready: %s", readyMessage(s))
	g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(bad), "the failed change is still the attempted one")
	g.Expect(s.Status.Failures).To(Equal(int64(1)), "the cut is not counted")

	// The next controller runs the rollback again; proceed=yes lets it finish.
	labelAppSettings(t, f.ns, "proceed", "yes")
	f.start(t)
	g.Eventually(func(g Gomega) {
		s = getStack(g, key)
		c := conditions.Get(s, v1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.RolledBackReason), "Ready: %s", readyMessage(s))
		g.Expect(s.Status.CurrentOperation).To(BeNil())
	}, 4*time.Minute, time.Second).Should(Succeed())
	h := s.Status.History
	g.Expect(len(h)).To(BeNumerically(">=", 3), "history: %+v", h)
	g.Expect(h[0].Type).To(Equal(v1alpha1.OperationRollback))
	g.Expect(h[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(h[0].Revision).To(HaveSuffix(good))
	g.Expect(h[1].Type).To(Equal(v1alpha1.OperationRollback), "the rollback the shutdown cut short")
	g.Expect(h[1].Reason).To(Equal(v1alpha1.InterruptedReason))
	g.Expect(h[2].Type).To(Equal(v1alpha1.OperationUp))
	g.Expect(h[2].Outcome).To(Equal(v1alpha1.OutcomeFailed))
	g.Expect(h[2].Revision).To(HaveSuffix(bad))
	g.Expect(s.Status.Rollback.Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(s.Status.Rollback.FailedRevision).To(HaveSuffix(bad))
	g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(good))
	g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(bad))
	g.Expect(s.Status.Failures).To(Equal(int64(1)))
}
