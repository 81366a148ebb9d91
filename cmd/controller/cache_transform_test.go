package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// What the controller's cache keeps of an object, in a real API server with
// the manager's cache options: a Stack written by two field managers and
// carrying kubectl's last-applied copy loses its managedFields and that copy, and
// keeps its other annotations (the reconcile-now request is read from the
// cache), labels and status; a Secret, watched as metadata, keeps its name
// and resourceVersion and no annotation (one held its data).
func TestCacheKeepsWhatTheControllerReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	g := NewWithT(t)
	ctx := context.Background()
	env := controlPlane.Get(t)
	ns := env.Namespace(t)

	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app",
			Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{
				v1alpha1.ReconcileRequestAnnotation: "now",
				lastAppliedAnnotation:               `{"spec":{"source":{"git":{"url":"https://git.example/app.git"}}}}`,
			}},
		Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{
			Git: &v1alpha1.GitSource{URL: "https://git.example/app.git", Ref: &v1alpha1.GitRef{Branch: "main"}}}},
	}
	g.Expect(env.Client.Create(ctx, stack, client.FieldOwner("kubectl"))).To(Succeed())
	before := stack.DeepCopy()
	stack.Status.LastAppliedRevision = "main@sha1:0123456789abcdef0123456789abcdef01234567"
	g.Expect(env.Client.Status().Patch(ctx, stack, client.MergeFrom(before), client.FieldOwner("stackpilot"))).To(Succeed())

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "passphrase",
		Annotations: map[string]string{lastAppliedAnnotation: `{"data":{"passphrase":"c2VjcmV0"}}`, "note": "x"}},
		Data: map[string][]byte{"passphrase": []byte("secret")}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())

	var fromServer v1alpha1.Stack
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, &fromServer)).To(Succeed())
	g.Expect(fromServer.ManagedFields).NotTo(BeEmpty(), "the API server keeps them: without them this test shows nothing")

	opts := cacheOptions(nil, []string{ns})
	opts.Scheme = testScheme()
	c, err := cache.New(env.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Start(cctx) }()

	var cached v1alpha1.Stack
	g.Eventually(func() error {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, &cached)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(cached.ManagedFields).To(BeEmpty())
	g.Expect(cached.Annotations).To(Equal(map[string]string{v1alpha1.ReconcileRequestAnnotation: "now"}))
	g.Expect(cached.Labels).To(Equal(map[string]string{"team": "a"}))
	g.Expect(cached.Status.LastAppliedRevision).To(Equal(stack.Status.LastAppliedRevision))
	g.Expect(cached.Spec).To(Equal(fromServer.Spec))

	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	g.Eventually(func() error {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "passphrase"}, meta)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(meta.Annotations).To(BeEmpty())
	g.Expect(meta.ManagedFields).To(BeEmpty())
	g.Expect(meta.ResourceVersion).NotTo(BeEmpty())
	raw, err := json.Marshal(meta)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("c2VjcmV0"))
}

// fullHistoryStack is a Stack as the API server sends it after many
// operations: a full history, conditions, the revision every Stack of its
// fleet applied.
func fullHistoryStack(t testing.TB, name string) []byte {
	return stackWithHistory(t, name, v1alpha1.MaxHistory)
}

// stackWithHistory is fullHistoryStack after records operations.
func stackWithHistory(t testing.TB, name string, records int) []byte {
	t.Helper()
	rev := "main@sha1:0123456789abcdef0123456789abcdef01234567"
	st := v1alpha1.StackStatus{LastAppliedRevision: rev, LastAttemptedRevision: rev,
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "Applied revision " + rev, LastTransitionTime: metav1.Now()},
			{Type: "Reconciling", Status: metav1.ConditionFalse, Reason: "Succeeded", Message: "Up to date", LastTransitionTime: metav1.Now()},
			{Type: "Stalled", Status: metav1.ConditionFalse, Reason: "Succeeded", Message: "", LastTransitionTime: metav1.Now()},
		}}
	for i := range records {
		now := metav1.Now()
		st.PushHistory(v1alpha1.OperationRecord{ID: fmt.Sprintf("up-20261207-0215%02d-%s", i, name), Type: v1alpha1.OperationUp,
			Revision: rev, StartedAt: now, FinishedAt: &now, Outcome: v1alpha1.OutcomeSucceeded,
			Message: "0 created, 0 updated, 0 replaced, 0 deleted, 1 unchanged", Host: "stackpilot-controller-7d9f8b6c5-x2k4q"})
	}
	data, err := json.Marshal(&v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}, Status: st})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeStack decodes as the informers do (sigs.k8s.io/json, whose slices
// grow by doubling).
func decodeStack(t testing.TB, data []byte) *v1alpha1.Stack {
	t.Helper()
	var s v1alpha1.Stack
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// The transform leaves a cached Stack saying exactly what the API server
// sent, with its history and conditions in slices of their length and the
// strings Stacks repeat held once.
func TestCacheCompactsStackStatus(t *testing.T) {
	g := NewWithT(t)
	a, b := decodeStack(t, fullHistoryStack(t, "a")), decodeStack(t, fullHistoryStack(t, "b"))
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	g.Expect(cap(a.Status.History)).To(BeNumerically(">", len(a.Status.History)), "the decoder left no spare room: this test shows nothing")
	for _, s := range []*v1alpha1.Stack{a, b} {
		_, err := trimForCache(s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cap(s.Status.History)).To(Equal(len(s.Status.History)))
		g.Expect(cap(s.Status.Conditions)).To(Equal(len(s.Status.Conditions)))
	}
	g.Expect(a).To(Equal(wantA))
	g.Expect(b).To(Equal(wantB))
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	g.Expect(same(a.Status.History[3].Revision, b.Status.History[7].Revision)).To(BeTrue(), "the revision is held twice")
	g.Expect(same(a.Status.History[0].Message, b.Status.History[0].Message)).To(BeTrue(), "the message is held twice")
	g.Expect(same(a.Status.Conditions[0].Message, b.Status.Conditions[0].Message)).To(BeTrue(), "the Ready message is held twice")
	g.Expect(same(a.Status.LastAppliedRevision, b.Status.History[0].Revision)).To(BeTrue())
}

// BenchmarkCachedStackMemory reports the live heap a cached Stack takes, as
// decoded and after the transform, with one history record and with a full
// history: go test -run - -bench CachedStackMemory ./cmd/controller
func BenchmarkCachedStackMemory(b *testing.B) {
	const n = 2000
	live := func(data [][]byte, compact bool) float64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		kept := make([]*v1alpha1.Stack, n)
		for i := range kept {
			kept[i] = decodeStack(b, data[i])
			if compact {
				_, _ = trimForCache(kept[i])
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(kept)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	for _, records := range []int{1, v1alpha1.MaxHistory} {
		data := make([][]byte, n)
		for i := range data {
			data[i] = stackWithHistory(b, fmt.Sprint("s", i), records)
		}
		var raw, compact float64
		for range b.N {
			raw, compact = live(data, false), live(data, true)
		}
		b.ReportMetric(raw, fmt.Sprintf("B/stack-decoded-%d-records", records))
		b.ReportMetric(compact, fmt.Sprintf("B/stack-cached-%d-records", records))
	}
}
