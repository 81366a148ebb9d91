package stack

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// recoverFixture is a Stack whose up finished: the API server has its final
// status, while the cache (what the reconcile read) still shows it running.
func recoverFixture(t *testing.T) (r *StackReconciler, cached *v1alpha1.Stack, final v1alpha1.OperationRecord) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	running := v1alpha1.OperationRecord{ID: "up-1", Type: v1alpha1.OperationUp, Revision: "main@sha1:a",
		StartedAt: started, Outcome: v1alpha1.OutcomeRunning, Host: "ctrl-a"}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: "infra", UID: "u-1"}}
	stack.Status.CurrentOperation = running.DeepCopy()
	stack.Status.History = []v1alpha1.OperationRecord{running}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack).WithStatusSubresource(stack).Build()
	g := NewWithT(t)
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	cached = stack.DeepCopy() // the informer's copy, from before the final patch

	final = running
	done := metav1.Now()
	final.FinishedAt, final.Outcome, final.Message = &done, v1alpha1.OutcomeSucceeded, "1 created"
	stack.Status.CurrentOperation = nil
	stack.Status.History = []v1alpha1.OperationRecord{final}
	g.Expect(c.Status().Update(context.Background(), stack)).To(Succeed())
	return &StackReconciler{Client: c, APIReader: c, Host: "ctrl-a"}, cached, final
}

// putStatus writes s's status over whatever the stored version holds.
func putStatus(t *testing.T, c client.Client, s *v1alpha1.Stack) {
	t.Helper()
	cur := &v1alpha1.Stack{}
	g := NewWithT(t)
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(s), cur)).To(Succeed())
	cur.Status = *s.Status.DeepCopy()
	g.Expect(c.Status().Update(context.Background(), cur)).To(Succeed())
}

func stateOf(r *StackReconciler, stack *v1alpha1.Stack) *reconcileState {
	return &reconcileState{stack: stack, patcher: patch.NewSerialPatcher(stack, r.Client)}
}

// TestFinishedOperationFromStaleCacheIsNotInterrupted: the reconcile after an
// up reads a cached Stack that still shows the up running. The up finished: it
// must not be recorded interrupted, nor counted, nor its lock cleared.
func TestFinishedOperationFromStaleCacheIsNotInterrupted(t *testing.T) {
	g := NewWithT(t)
	r, cached, final := recoverFixture(t)
	r.inflight.start(cached.UID, final.ID)
	r.inflight.end(cached.UID, final)

	st := stateOf(r, cached)
	_, err := r.recoverInterrupted(context.Background(), st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.recovered).To(BeNil(), "not interrupted")
	g.Expect(st.stack.Status.CurrentOperation).To(BeNil())
	g.Expect(st.stack.Status.History).To(HaveLen(1))
	g.Expect(st.stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(st.stack.Status.Failures).To(BeZero())
	g.Expect(r.staleLock(context.Background(), st.stack)).To(BeNil(), "no lock is cleared")
}

// A new controller process (nothing in memory) confirms against the API server too.
func TestStaleCacheAfterRestartIsNotInterrupted(t *testing.T) {
	g := NewWithT(t)
	r, cached, _ := recoverFixture(t)
	st := stateOf(r, cached)
	_, err := r.recoverInterrupted(context.Background(), st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.recovered).To(BeNil())
	g.Expect(st.stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
}

// When the final status patch did not land, the record kept in memory is
// written, not an interruption.
func TestFinishedOperationWhosePatchFailed(t *testing.T) {
	g := NewWithT(t)
	r, cached, final := recoverFixture(t)
	r.inflight.end(cached.UID, final)
	// The API server still has the running record, as the cache does.
	putStatus(t, r.Client, cached)
	fresh := &v1alpha1.Stack{}
	g.Expect(r.APIReader.Get(context.Background(), client.ObjectKeyFromObject(cached), fresh)).To(Succeed())

	st := stateOf(r, fresh)
	_, err := r.recoverInterrupted(context.Background(), st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.recovered).To(BeNil())
	g.Expect(st.stack.Status.CurrentOperation).To(BeNil())
	g.Expect(st.stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
}

// A real interruption: the API server too has the operation running, and
// this process neither runs nor ran it. It is recorded, counted as a failure,
// and the next operation asks for the lock of that host and time only.
func TestInterruptedOperationIsRecordedAndCounted(t *testing.T) {
	g := NewWithT(t)
	r, cached, _ := recoverFixture(t)
	putStatus(t, r.Client, cached)
	fresh := &v1alpha1.Stack{}
	g.Expect(r.APIReader.Get(context.Background(), client.ObjectKeyFromObject(cached), fresh)).To(Succeed())
	fresh.Status.Failures = 1

	st := stateOf(r, fresh)
	_, err := r.recoverInterrupted(context.Background(), st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.recovered).NotTo(BeNil())
	g.Expect(st.stack.Status.CurrentOperation).To(BeNil())
	g.Expect(st.stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
	g.Expect(st.stack.Status.Failures).To(Equal(int64(2)), "counted like a failure")

	req := r.staleLock(context.Background(), st.stack)
	g.Expect(req).NotTo(BeNil())
	g.Expect(req.Host).To(Equal("ctrl-a"))
	g.Expect(req.NotBefore).To(Equal(st.stack.Status.History[0].StartedAt.Time))
	g.Expect(req.HostGone).To(BeFalse())
}

// Another Pod's interrupted operation: its lock may go only once that Pod is gone.
func TestStaleLockOfAnotherPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, cached, _ := recoverFixture(t)
	r.Host, r.PodNamespace = "ctrl-b", "stackpilot-system"
	stack := cached.DeepCopy()
	done := metav1.Now()
	stack.Status.History[0].FinishedAt = &done
	stack.Status.History[0].Outcome = v1alpha1.OutcomeInterrupted
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeTrue(), "no Pod ctrl-a: gone")

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ctrl-a", Namespace: "stackpilot-system"}}
	g.Expect(r.Client.Create(ctx, pod)).To(Succeed())
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeFalse(), "Pod ctrl-a still exists")

	r.PodNamespace = "" // not in a Pod: nothing proves another host gone
	g.Expect(r.Client.Delete(ctx, pod)).To(Succeed())
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeFalse())
}

// TestStaleLockOfARestartedPod: the other Pod is still there, but its
// controller container was killed and restarted since the operation began
// (SIGKILL, OOM, a failed liveness probe: high availability's failover).
// Every process of the old instance died with it, so the lock may go; a
// container that did not restart keeps it.
func TestStaleLockOfARestartedPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, cached, _ := recoverFixture(t)
	r.Host, r.PodNamespace = "ctrl-b", "stackpilot-system"
	stack := cached.DeepCopy()
	done := metav1.Now()
	stack.Status.History[0].FinishedAt = &done
	stack.Status.History[0].Outcome = v1alpha1.OutcomeInterrupted
	opStart := stack.Status.History[0].StartedAt.Time

	created := metav1.NewTime(opStart.Add(-time.Hour))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ctrl-a", Namespace: "stackpilot-system", CreationTimestamp: created},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "x"}}}}
	g.Expect(r.Client.Create(ctx, pod)).To(Succeed())
	setContainer := func(s corev1.ContainerStatus) {
		s.Name = "manager"
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{s}
		g.Expect(r.Client.Status().Update(ctx, pod)).To(Succeed())
	}
	running := func(since time.Time) corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(since)}}
	}

	setContainer(corev1.ContainerStatus{State: running(opStart.Add(-time.Minute))})
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeFalse(), "the container that ran the operation still runs")

	setContainer(corev1.ContainerStatus{State: running(opStart.Add(time.Second))})
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeFalse(), "within the clocks' slack: not proven")

	setContainer(corev1.ContainerStatus{State: running(opStart.Add(30 * time.Second)), RestartCount: 1})
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeTrue(), "restarted after the operation began")

	setContainer(corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(opStart.Add(10 * time.Second))}},
	})
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeTrue(), "ended after the operation began, not started again")

	// A sidecar that never restarted: its processes may hold the lock.
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Image: "x"})
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "manager", State: running(opStart.Add(30 * time.Second))},
		{Name: "sidecar", State: running(opStart.Add(-time.Minute))},
	}
	g.Expect(r.Client.Delete(ctx, pod)).To(Succeed())
	pod.ResourceVersion = ""
	g.Expect(r.Client.Create(ctx, pod)).To(Succeed())
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeFalse(), "one container did not restart")

	// Another Pod of the same name, made after the operation began.
	g.Expect(r.Client.Delete(ctx, pod)).To(Succeed())
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ctrl-a", Namespace: "stackpilot-system",
		CreationTimestamp: metav1.NewTime(opStart.Add(time.Minute))}}
	g.Expect(r.Client.Create(ctx, fresh)).To(Succeed())
	g.Expect(r.staleLock(ctx, stack).HostGone).To(BeTrue(), "a new Pod of that name")
}

// TestCacheFromBeforeTheOperationIsRefreshed: the reconcile after an up
// reads a cached Stack from before that up even started (a loaded API
// server delivered the watch events late). It must read the Stack again:
// deciding from the old status would take the retry for a first apply, and
// its patch would replace the history with one that lacks the up.
func TestCacheFromBeforeTheOperationIsRefreshed(t *testing.T) {
	g := NewWithT(t)
	r, cached, final := recoverFixture(t)
	r.inflight.start(cached.UID, final.ID)
	r.inflight.end(cached.UID, final)
	before := cached.DeepCopy()
	before.Status.CurrentOperation = nil
	before.Status.History = nil
	stale := before.DeepCopy() // the refresh below writes into before

	st := stateOf(r, before)
	_, err := r.recoverInterrupted(context.Background(), st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.stack.Status.History).To(HaveLen(1), "the API server's status, with the finished up")
	g.Expect(st.stack.Status.History[0].ID).To(Equal(final.ID))
	g.Expect(st.stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(r.inflight.cacheBehind(st.stack)).To(BeFalse())

	// The record is kept while the cache is behind, and dropped once a
	// cached Stack shows the operation: an idle fleet keeps none.
	r.inflight.forgetSeen(stale)
	g.Expect(r.inflight.cacheBehind(stale)).To(BeTrue(), "kept: the cache had not seen the up")
	r.inflight.forgetSeen(st.stack)
	g.Expect(r.inflight.finished).NotTo(HaveKey(cached.UID), "the cache holds it now")
	g.Expect(r.inflight.cacheBehind(stale)).To(BeFalse(), "nothing left to compare with")
}

// TestSuspendedStackRecoversItsInterruptedOperation (issue 21, item 22): a
// Stack suspended while its controller was dead still has its unfinished
// operation recorded as interrupted, not frozen "running" for as long as it
// is suspended.
func TestSuspendedStackRecoversItsInterruptedOperation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, cached, _ := recoverFixture(t)
	putStatus(t, r.Client, cached) // the API server too has the up running
	stack := &v1alpha1.Stack{}
	g.Expect(r.Client.Get(ctx, client.ObjectKeyFromObject(cached), stack)).To(Succeed())
	stack.Finalizers = []string{v1alpha1.StackFinalizer}
	stack.Spec.Suspend = true
	g.Expect(r.Client.Update(ctx, stack)).To(Succeed())

	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stack)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	g.Expect(stack.Status.CurrentOperation).To(BeNil(), "no phantom operation")
	g.Expect(stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
	ready := conditions.Get(stack, v1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).NotTo(Equal(metav1.ConditionUnknown))
	g.Expect(ready.Reason).To(Equal(v1alpha1.InterruptedReason))
}
