package e2e

import (
	"context"
	"strings"
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
	"github.com/stackpilot/stackpilot/internal/runner"
)

// TestRolloutCancelIsNoFailure (issue 21, item 19): a controller rollout
// (SIGTERM) cuts an up short. That is no failure of the program: Ready is
// Unknown with reason Interrupted (not False/OperationFailed), no Warning
// event is recorded, no failure is counted, and the Alert that saw the
// first apply sees the apply after the restart as "applied" only: no
// "failed", no "recovered" (a PagerDuty resolve without a trigger).
func TestRolloutCancelIsNoFailure(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const grace = 30 * time.Second
	f := newFixture(t)
	sink := newAlertSink(t, false)
	f.start(t, "--graceful-shutdown-timeout="+grace.String())
	logOnFailure(t, f)
	g.Expect(env.Client.Create(ctx, newAlert(f.ns, "ops", v1alpha1.ProviderGeneric, sink.URL()+"/ops", ""))).To(Succeed())
	g.Eventually(func(g Gomega) {
		var a v1alpha1.Alert
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "ops"}, &a)).To(Succeed())
		g.Expect(conditions.IsReady(&a)).To(BeTrue())
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	stack := f.stack("rollout", func(s *v1alpha1.Stack) { s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)
	g.Eventually(func() []string { return eventsOf(t, sink.Requests()) }, time.Minute, 200*time.Millisecond).
		Should(Equal([]string{"applied"}))

	// The new revision's ConfigMap is ready only once labelled proceed=yes:
	// the up waits on it while the controller is stopped.
	gated := gatedProgram("gated")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": gated}, "gated")
	requestReconcile(t, key)
	var opID string
	g.Eventually(func(g Gomega) {
		op := getStack(g, key).Status.CurrentOperation
		g.Expect(op).NotTo(BeNil())
		opID = op.ID
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "gated"))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())

	g.Expect(syscall.Kill(f.ctrl.Pid(), syscall.SIGTERM)).To(Succeed())
	g.Eventually(f.ctrl.Exited(), grace+20*time.Second).Should(BeClosed())

	s := getStack(g, key)
	g.Expect(s.Status.CurrentOperation).To(BeNil(), "the end of the up was recorded")
	last := s.Status.History[0]
	g.Expect(last.ID).To(Equal(opID))
	g.Expect(last.Outcome).To(Equal(v1alpha1.OperationOutcome(runner.OutcomeCancelled)), "Pulumi stopped when asked: %+v", last)
	g.Expect(last.Reason).To(Equal(v1alpha1.InterruptedReason))
	ready := conditions.Get(s, v1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionUnknown), "Ready: %s", readyMessage(s))
	g.Expect(ready.Reason).To(Equal(v1alpha1.InterruptedReason), "Ready: %s", readyMessage(s))
	g.Expect(ready.Message).To(ContainSubstring("cut short by the controller's shutdown"))
	g.Expect(s.Status.Failures).To(BeZero(), "no failure counted")
	g.Expect(warningEvents(t, f.ns, "rollout")).To(BeEmpty(), "no Warning event")

	// The gate opens; the next controller applies the revision at once.
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &cm)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, &cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"proceed":"yes"}}}`)))).To(Succeed())
	f.start(t)
	waitApplied(t, key, next)
	g.Eventually(func() []string { return eventsOf(t, sink.Requests()) }, time.Minute, 200*time.Millisecond).
		Should(Equal([]string{"applied", "applied"}))
	g.Consistently(func() []string { return eventsOf(t, sink.Requests()) }, 5*time.Second, 500*time.Millisecond).
		Should(Equal([]string{"applied", "applied"}), "no failed, no recovered")
	g.Expect(warningEvents(t, f.ns, "rollout")).To(BeEmpty())
}

// warningEvents lists the Warning events about a Stack, as "reason: message".
func warningEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+strings.TrimSpace(e.Message))
		}
	}
	return out
}
