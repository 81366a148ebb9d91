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
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func depStack(ns, name string, deps ...string) *v1alpha1.Stack {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1}}
	s.Spec.Source.Git = &v1alpha1.GitSource{URL: "https://git.example/infra"}
	for _, d := range deps {
		s.Spec.DependsOn = append(s.Spec.DependsOn, v1alpha1.DependencyReference{Name: d})
	}
	return s
}

// readyStack is a Stack that applied revision rev and is Ready at its
// generation, with nothing pending.
func readyStack(ns, name, rev string, deps ...string) *v1alpha1.Stack {
	s := depStack(ns, name, deps...)
	s.Status.ObservedGeneration = 1
	s.Status.LastAppliedRevision = rev
	s.Status.LastAppliedProgramDigest, s.Status.LastAttemptedProgramDigest = "sha256:p", "sha256:p"
	s.Status.InputsDigest, s.Status.LastAttemptedInputsDigest = "hmac-sha256:i", "hmac-sha256:i"
	conditions.MarkTrue(s, v1alpha1.ReadyCondition, v1alpha1.SucceededReason, "Applied")
	return s
}

func lookup(stacks ...*v1alpha1.Stack) func(ns, name string) *v1alpha1.Stack {
	return func(ns, name string) *v1alpha1.Stack {
		for _, s := range stacks {
			if s.Namespace == ns && s.Name == name {
				return s
			}
		}
		return nil
	}
}

func TestFindCycle(t *testing.T) {
	g := NewWithT(t)
	a, b, c := depStack("ns", "a", "b"), depStack("ns", "b", "c"), depStack("ns", "c", "a")
	get := lookup(a, b, c)
	g.Expect(findCycle(a, get)).To(Equal([]string{"a", "b", "c", "a"}))
	g.Expect(findCycle(b, get)).To(Equal([]string{"b", "c", "a", "b"}))

	self := depStack("ns", "self", "self")
	g.Expect(findCycle(self, lookup(self))).To(Equal([]string{"self", "self"}))

	// d depends on the cycle but is not in it: it waits, it is not Stalled.
	d := depStack("ns", "d", "a")
	g.Expect(findCycle(d, lookup(a, b, c, d))).To(BeNil())

	// A chain, a diamond and a missing Stack are no cycles.
	net, cl, app := depStack("ns", "network"), depStack("ns", "cluster", "network"), depStack("ns", "app", "cluster", "network", "missing")
	g.Expect(findCycle(app, lookup(net, cl, app))).To(BeNil())

	// Through stackOutputs (an implicit dependency) and another namespace.
	x := depStack("ns", "x")
	x.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{Name: "y", Namespace: "other"}}}
	y := depStack("other", "y")
	y.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "x", Namespace: "ns"}}
	g.Expect(findCycle(x, lookup(x, y))).To(Equal([]string{"x", "other/y", "x"}))
}

func TestDependenciesOf(t *testing.T) {
	g := NewWithT(t)
	s := depStack("ns", "app", "cluster", "cluster")
	s.Spec.DependsOn = append(s.Spec.DependsOn, v1alpha1.DependencyReference{Name: "db", Namespace: "data"})
	s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{
		{ConfigMapRef: &v1alpha1.OptionalObjectReference{Name: "cm"}},
		{StackOutputs: &v1alpha1.StackOutputsReference{Name: "cluster"}},
		{StackOutputs: &v1alpha1.StackOutputsReference{Name: "network"}},
	}
	g.Expect(indexDependencies(s)).To(Equal([]string{"ns/cluster", "data/db", "ns/network"}), "each once, stackOutputs included")
	g.Expect(dependenciesOf(s)[2].field).To(Equal("spec.configFrom[2].stackOutputs"))
}

func TestNotReadyBecause(t *testing.T) {
	const rev = "main@sha1:abc"
	down := depStack("ns", "app", "net")
	cases := map[string]struct {
		mutate func(*v1alpha1.Stack)
		want   string
	}{
		"ready":            {func(*v1alpha1.Stack) {}, ""},
		"never reconciled": {func(s *v1alpha1.Stack) { s.Status = v1alpha1.StackStatus{} }, "has not reconciled its latest generation (1) yet"},
		"new generation":   {func(s *v1alpha1.Stack) { s.Generation = 2 }, "has not reconciled its latest generation (2) yet"},
		"not ready": {func(s *v1alpha1.Stack) {
			conditions.MarkFalse(s, v1alpha1.ReadyCondition, "ProgramError", "boom\nmore")
		}, "is not Ready (ProgramError: boom)"},
		"deleting": {func(s *v1alpha1.Stack) { now := metav1.Now(); s.DeletionTimestamp = &now }, "is being deleted"},
		"running an up": {func(s *v1alpha1.Stack) {
			s.Status.CurrentOperation = &v1alpha1.OperationRecord{ID: "up-1", Type: v1alpha1.OperationUp}
		}, "is running an operation (up up-1)"},
		"pending plan":    {func(s *v1alpha1.Stack) { s.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "p-1"} }, "has a plan waiting for approval (p-1)"},
		"nothing applied": {func(s *v1alpha1.Stack) { s.Status.LastAppliedProgramDigest = "" }, "has not applied anything yet"},
		"failed attempt":  {func(s *v1alpha1.Stack) { s.Status.LastAttemptedInputsDigest = "hmac-sha256:new" }, "has a change that is not applied (its last attempt did not succeed)"},
		"older revision":  {func(s *v1alpha1.Stack) { s.Status.LastAppliedRevision = "main@sha1:old" }, "has not applied revision main@sha1:abc yet (it is at main@sha1:old)"},
		"other repo": {func(s *v1alpha1.Stack) {
			s.Status.LastAppliedRevision = "main@sha1:old"
			s.Spec.Source.Git.URL = "https://git.example/other"
		}, ""},
		"drift check": {func(s *v1alpha1.Stack) {
			s.Status.CurrentOperation = &v1alpha1.OperationRecord{ID: "d-1", Type: v1alpha1.OperationDriftCheck}
		}, ""},
		"suspended, ready": {func(s *v1alpha1.Stack) { s.Spec.Suspend = true }, ""},
		"stale ready":      {func(s *v1alpha1.Stack) { s.Status.Conditions[0].ObservedGeneration = 0 }, "has not reconciled its latest generation (1) yet"},
		"no ready":         {func(s *v1alpha1.Stack) { s.Status.Conditions = nil }, "is not Ready yet"},
		// A PreviewOnly dependency is relied on at what it applied: its
		// plans are never applied, a wait for them would never end.
		"preview only, plan pending": {func(s *v1alpha1.Stack) {
			previewOnly(s)
			s.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "p-1", Revision: "main@sha1:new"}
		}, ""},
		"preview only, plan of a newer revision of the same source": {func(s *v1alpha1.Stack) {
			previewOnly(s)
			s.Status.LastAppliedRevision = "main@sha1:old"
			s.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "p-1", Revision: rev}
		}, ""},
		"preview only, nothing applied": {func(s *v1alpha1.Stack) {
			previewOnly(s)
			s.Status.LastAppliedProgramDigest = ""
		}, "has not applied anything, and never will while its spec.approval.mode is PreviewOnly: set it to Auto or Manual, or remove the dependency"},
		"preview only, running an up": {func(s *v1alpha1.Stack) {
			previewOnly(s)
			s.Status.CurrentOperation = &v1alpha1.OperationRecord{ID: "up-1", Type: v1alpha1.OperationUp}
		}, "is running an operation (up up-1)"},
		"manual, plan pending": {func(s *v1alpha1.Stack) {
			s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
			s.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "p-1"}
		}, "has a plan waiting for approval (p-1)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			up := readyStack("ns", "net", rev)
			tc.mutate(up)
			NewWithT(t).Expect(notReadyBecause(up, down, rev)).To(Equal(tc.want))
		})
	}
}

func dependencyReconciler(t *testing.T, allowCross bool, objs ...client.Object) *StackReconciler {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &StackReconciler{Client: c, Config: Config{AllowCrossNamespaceRefs: allowCross}}
}

func TestCheckDependencies(t *testing.T) {
	ctx := context.Background()
	const rev = "main@sha1:abc"
	run := func(r *StackReconciler, s *v1alpha1.Stack) (stepResult, error) {
		return r.checkDependencies(ctx, &reconcileState{stack: s, revision: rev})
	}

	t.Run("no dependencies", func(t *testing.T) {
		res, err := run(dependencyReconciler(t, false), depStack("ns", "app"))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(res).To(Equal(stepContinue))
	})
	t.Run("ready", func(t *testing.T) {
		g := NewWithT(t)
		r := dependencyReconciler(t, false, readyStack("ns", "net", rev), readyStack("ns", "cluster", rev, "net"))
		res, err := run(r, depStack("ns", "app", "cluster"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(stepContinue))
	})
	t.Run("missing", func(t *testing.T) {
		g := NewWithT(t)
		res, err := run(dependencyReconciler(t, false), depStack("ns", "app", "cluster"))
		g.Expect(res).To(Equal(stepDone))
		var w *WaitingError
		g.Expect(errors.As(err, &w)).To(BeTrue(), "%v", err)
		g.Expect(w.Reason).To(Equal(v1alpha1.DependencyNotReadyReason))
		g.Expect(w.RequeueAfter).To(Equal(dependencyRequeue))
		g.Expect(w.Error()).To(Equal("dependency cluster (spec.dependsOn[0]) not found"))
	})
	t.Run("stackOutputs upstream not ready", func(t *testing.T) {
		g := NewWithT(t)
		up := readyStack("ns", "net", rev)
		up.Status.CurrentOperation = &v1alpha1.OperationRecord{ID: "up-2", Type: v1alpha1.OperationUp}
		s := depStack("ns", "app")
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{Name: "net"}}}
		_, err := run(dependencyReconciler(t, false, up), s)
		g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.DependencyNotReadyReason))
		g.Expect(err.Error()).To(Equal("dependency net (spec.configFrom[0].stackOutputs) is running an operation (up up-2)"))
	})
	t.Run("cross-namespace refused", func(t *testing.T) {
		g := NewWithT(t)
		s := depStack("ns", "app")
		s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "net", Namespace: "infra"}}
		_, err := run(dependencyReconciler(t, false, readyStack("infra", "net", rev)), s)
		var st *StallingError
		g.Expect(errors.As(err, &st)).To(BeTrue(), "%v", err)
		g.Expect(st.Reason).To(Equal(v1alpha1.CrossNamespaceRefNotAllowedReason))
		g.Expect(err.Error()).To(ContainSubstring("--allow-cross-namespace-refs"))
		g.Expect(err.Error()).To(ContainSubstring("infra/net"))

		res, err := run(dependencyReconciler(t, true, readyStack("infra", "net", rev)), s)
		g.Expect(err).NotTo(HaveOccurred(), "allowed with the flag")
		g.Expect(res).To(Equal(stepContinue))
	})
	t.Run("cycle", func(t *testing.T) {
		g := NewWithT(t)
		a := depStack("ns", "a", "b")
		r := dependencyReconciler(t, false, a, readyStack("ns", "b", rev, "c"), readyStack("ns", "c", rev, "a"))
		_, err := run(r, a)
		var st *StallingError
		g.Expect(errors.As(err, &st)).To(BeTrue(), "%v", err)
		g.Expect(st.Reason).To(Equal(v1alpha1.DependencyCycleReason))
		g.Expect(err.Error()).To(ContainSubstring("a -> b -> c -> a"))
	})
}

func TestDependencyChanged(t *testing.T) {
	g := NewWithT(t)
	p := dependencyChanged{}
	base := readyStack("ns", "net", "main@sha1:abc")
	update := func(mutate func(*v1alpha1.Stack)) bool {
		cur := base.DeepCopy()
		mutate(cur)
		return p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: cur})
	}
	g.Expect(p.Create(event.CreateEvent{Object: base})).To(BeTrue())
	g.Expect(p.Delete(event.DeleteEvent{Object: base})).To(BeTrue())
	g.Expect(update(func(s *v1alpha1.Stack) { s.Status.History = []v1alpha1.OperationRecord{{ID: "d-1"}} })).To(BeFalse(),
		"nothing a dependent reads")
	g.Expect(update(func(s *v1alpha1.Stack) {
		conditions.MarkFalse(s, v1alpha1.ReadyCondition, "ProgramError", "boom")
	})).To(BeTrue(), "Ready")
	g.Expect(update(func(s *v1alpha1.Stack) { s.Status.ObservedGeneration = 2 })).To(BeTrue(), "observedGeneration")
	g.Expect(update(func(s *v1alpha1.Stack) { s.Generation = 2 })).To(BeTrue(), "generation")
	g.Expect(update(func(s *v1alpha1.Stack) { s.Status.Outputs = map[string]string{"a": `"1"`} })).To(BeTrue(), "outputs")
	g.Expect(update(func(s *v1alpha1.Stack) { s.Status.CurrentOperation = &v1alpha1.OperationRecord{ID: "up-1"} })).To(BeTrue(), "an operation")
	g.Expect(update(func(s *v1alpha1.Stack) { s.Status.InputsDigest = "hmac-sha256:other" })).To(BeTrue(), "applied inputs")
}

func TestOutputsReaders(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	up := readyStack("ns", "net", "r")
	up.UID = "uid-net"
	reader := depStack("ns", "app")
	reader.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{Name: "net"}}}
	waiter := depStack("ns", "other", "net")
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(up, reader, waiter).
		WithIndex(&v1alpha1.Stack{}, dependsOnIndex, indexDependencies).Build()
	r := &StackReconciler{Client: c}

	yes := true
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "net-outputs",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Stack", Name: "net", UID: up.UID, Controller: &yes}}}}
	reqs := r.outputsReaders(ctx, sec)
	g.Expect(reqs).To(HaveLen(1))
	g.Expect(reqs[0].Name).To(Equal("app"), "only the Stacks that read its outputs")
	g.Expect(r.dependents(ctx, up)).To(HaveLen(2), "all the Stacks that depend on it")

	sec.OwnerReferences[0].APIVersion = "example.com/v1"
	g.Expect(r.outputsReaders(ctx, sec)).To(BeEmpty(), "a Stack of another API group")
}

// previewOnly makes s a PreviewOnly Stack, Ready as markPreviewOnly leaves it.
func previewOnly(s *v1alpha1.Stack) {
	s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalPreviewOnly}
	conditions.MarkTrue(s, v1alpha1.ReadyCondition, v1alpha1.PreviewOnlyReason, "Plan p-1: applies nothing")
}
