package stack

import (
	"context"
	"errors"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// laggingCache is the manager's client with an informer cache that has not
// seen the Stack's last status patch: Get returns the Stack as it was,
// writes go to the API server (the fake's store).
type laggingCache struct {
	client.Client
	stale *v1alpha1.Stack
	// failGets makes that many Gets of the Stack fail first.
	failGets int
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	s, ok := obj.(*v1alpha1.Stack)
	if !ok || key != client.ObjectKeyFromObject(c.stale) {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	if c.failGets > 0 {
		c.failGets--
		return errors.New("the cache is not reachable")
	}
	c.stale.DeepCopyInto(s)
	return nil
}

// startFixture: the cache holds the Stack Ready=True; the API server has
// since recorded a failure (Ready=False), which the reconcile read with
// refresh (as recoverInterrupted does when the cache is behind).
func startFixture(t *testing.T) (*StackReconciler, *laggingCache, *reconcileState) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: "infra", UID: "u-1", Generation: 1}}
	conditions.MarkTrue(stack, v1alpha1.ReadyCondition, v1alpha1.SucceededReason, "Applied revision main@sha1:a")
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack).WithStatusSubresource(stack).Build()
	g.Expect(api.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	cache := &laggingCache{Client: api, stale: stack.DeepCopy()}

	conditions.MarkFalse(stack, v1alpha1.ReadyCondition, v1alpha1.ProgramErrorReason, "up failed")
	stack.Status.Failures = 1
	g.Expect(api.Status().Update(ctx, stack)).To(Succeed())

	r := &StackReconciler{Client: cache, APIReader: api, Host: "ctrl-a"}
	st := stateOf(r, cache.stale.DeepCopy())
	g.Expect(r.refresh(ctx, st)).To(Succeed())
	g.Expect(conditions.IsFalse(st.stack, v1alpha1.ReadyCondition)).To(BeTrue(), "refreshed from the API server")
	st.inputs = &inputs{Digest: "hmac-sha256:i"}
	st.programDigest = "sha256:p"
	return r, cache, st
}

func startRecord() v1alpha1.OperationRecord {
	return v1alpha1.OperationRecord{ID: "up-1", Type: v1alpha1.OperationUp, Revision: "main@sha1:b",
		StartedAt: metav1.Now(), Outcome: v1alpha1.OutcomeRunning, Host: "ctrl-a"}
}

func serverStack(t *testing.T, r *StackReconciler, key client.ObjectKey) *v1alpha1.Stack {
	t.Helper()
	s := &v1alpha1.Stack{}
	NewWithT(t).Expect(r.APIReader.Get(context.Background(), key, s)).To(Succeed())
	return s
}

// TestStartRecordedAfterRefresh (issue 21, item 13): after refresh() read
// the Stack from the API server, the cache is behind the patch's base. The
// start of the operation must land whole (its record and Ready Unknown), so
// that the operation runs; before, the Ready change conflicted while the
// rest of the status still wrote currentOperation, nothing ran, and the next
// reconcile recorded an interruption.
func TestStartRecordedAfterRefresh(t *testing.T) {
	g := NewWithT(t)
	r, _, st := startFixture(t)
	err := r.recordStart(context.Background(), st, startRecord(), runner.OpUp, artifact.Artifact{Digest: "sha256:t"})
	g.Expect(err).NotTo(HaveOccurred())

	s := serverStack(t, r, client.ObjectKeyFromObject(st.stack))
	g.Expect(s.Status.CurrentOperation).NotTo(BeNil())
	g.Expect(s.Status.CurrentOperation.ID).To(Equal("up-1"))
	ready := conditions.Get(s, v1alpha1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionUnknown), "Ready: %s %s", ready.Reason, ready.Message)
	g.Expect(ready.Message).To(Equal("Running up of revision main@sha1:b"))
}

// TestFailedStartIsTakenBack: when the start patch fails part-way (here the
// conditions' half: its read of the latest Stack fails), nothing runs, and
// the reconcile's final patch takes back what landed: no operation is left
// running in status, to be found interrupted later.
func TestFailedStartIsTakenBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: "infra", UID: "u-1", Generation: 1}}
	stack.Spec.Interval = metav1.Duration{Duration: 3600e9}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack).WithStatusSubresource(stack).Build()
	g.Expect(api.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	cache := &laggingCache{Client: api, stale: stack, failGets: 5}
	r := &StackReconciler{Client: cache, APIReader: api, Host: "ctrl-a"}
	st := stateOf(r, stack.DeepCopy())
	st.inputs = &inputs{Digest: "hmac-sha256:i"}

	err := r.recordStart(ctx, st, startRecord(), runner.OpUp, artifact.Artifact{})
	g.Expect(err).To(HaveOccurred())
	g.Expect(serverStack(t, r, client.ObjectKeyFromObject(stack)).Status.CurrentOperation).NotTo(BeNil(),
		"the status half of the start patch landed")
	g.Expect(st.stack.Status.CurrentOperation).To(BeNil())
	g.Expect(st.stack.Status.History).To(BeEmpty())

	_, _ = r.summarize(ctx, st, err)
	s := serverStack(t, r, client.ObjectKeyFromObject(stack))
	g.Expect(s.Status.CurrentOperation).To(BeNil(), "taken back")
	g.Expect(s.Status.History).To(BeEmpty())
	g.Expect(s.Status.LastAttemptedRevision).To(BeEmpty())
}
