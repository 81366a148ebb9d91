package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// gatedProgram is the bridge program whose ConfigMap is only ready once it is
// labelled proceed=yes: the provider applies it, then waits, holding the
// stack's lock for as long as the test wants.
func gatedProgram(size string) string {
	return replaceOnce(bridgeProgram("\n        size: "+size), "        name: app-settings\n",
		"        name: app-settings\n        annotations:\n          pulumi.com/waitFor: \"jsonpath={.metadata.labels.proceed}=yes\"\n")
}

func letProceed(t *testing.T, ns string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	cm.Name, cm.Namespace = "app-settings", ns
	if err := env.Client.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"proceed":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
}

// TestTwoStacksOnOneStack: two Stacks name the same backend (the namespace's
// default) and stackName. The first applies. The second, created while the
// first's up is running and holding the lock, is Stalled/StackClaimed naming
// the first, runs nothing on the stack and never touches the first's lock;
// the first's up then succeeds and its ConfigMap carries only its own config.
func TestTwoStacksOnOneStack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	shared := func(s *v1alpha1.Stack) { s.Spec.StackName = "shared" }
	first := f.stack("first", shared)
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	firstKey := client.ObjectKeyFromObject(first)
	waitApplied(t, firstKey, f.commit)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	s := getStack(g, firstKey)
	g.Expect(s.Status.AppliedStack).NotTo(BeNil())
	g.Expect(s.Status.AppliedStack.StackName).To(Equal("shared"))
	g.Expect(s.Status.AppliedStack.Backend).To(HavePrefix("file://"))

	// The first's next up waits on its ConfigMap, holding the stack's lock.
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": gatedProgram("gated")}, "gated")
	requestReconcile(t, firstKey)
	locks := filepath.Join(f.dataDir, "state", f.ns, ".pulumi", "locks", "organization", "bridge", "shared", "*.json")
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, firstKey).Status.CurrentOperation).NotTo(BeNil())
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "gated"))
		g.Expect(filepath.Glob(locks)).To(HaveLen(1))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	lock, _ := filepath.Glob(locks)

	second := f.stack("second", shared, func(s *v1alpha1.Stack) {
		s.Spec.Config["color"] = apiextensionsv1.JSON{Raw: []byte(`"red"`)}
		s.Spec.DestroyOnDelete = true
	})
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	secondKey := client.ObjectKeyFromObject(second)
	s = waitNotReady(t, secondKey, v1alpha1.StackClaimedReason)
	g.Expect(conditions.IsStalled(s)).To(BeTrue())
	g.Expect(readyMessage(s)).To(ContainSubstring("belongs to Stack " + f.ns + "/first"))
	g.Expect(readyMessage(s)).To(ContainSubstring("spec.stackName"))
	g.Expect(s.Status.History[0].Reason).To(Equal(v1alpha1.StackClaimedReason))
	g.Expect(s.Status.AppliedStack).To(BeNil())

	g.Expect(lock[0]).To(BeAnExistingFile(), "the first's lock is never cleared")
	g.Expect(getStack(g, firstKey).Status.CurrentOperation).NotTo(BeNil(), "the first's up still runs")
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))

	letProceed(t, f.ns)
	s = waitApplied(t, firstKey, next)
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))

	// Deleting the second (destroyOnDelete) destroys nothing: the stack is the first's.
	g.Expect(env.Client.Delete(ctx, second)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, secondKey, &v1alpha1.Stack{}))
	}, 2*time.Minute, time.Second).Should(BeTrue())
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	g.Expect(conditions.IsReady(getStack(g, firstKey))).To(BeTrue())
	g.Expect(f.ctrl.Operations(t, "destroy")).To(BeZero())
}

// TestStackChangedIsRefused: a Stack that applied to one Pulumi stack and is
// then pointed at another is Stalled/StackChanged, saying how to move the
// state; reverting the change recovers.
func TestStackChangedIsRefused(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("moving")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)
	runs := f.ctrl.Operations(t, "up")

	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stackName":"elsewhere"}}`)))).To(Succeed())
	s := waitNotReady(t, key, v1alpha1.StackChangedReason)
	g.Expect(conditions.IsStalled(s)).To(BeTrue())
	g.Expect(readyMessage(s)).To(ContainSubstring("pulumi stack export"))
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(runs), "no up on the new, empty stack")

	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stackName":null}}`)))).To(Succeed())
	waitApplied(t, key, f.commit)
}

// TestFirstUpFailedPartwayIsDestroyed: the first up creates one ConfigMap and
// fails on the next resource; deleting the Stack with destroyOnDelete destroys
// what was created although no up ever succeeded.
func TestFirstUpFailedPartwayIsDestroyed(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	// The API server refuses the second ConfigMap's name; it depends on the
	// first, so the first is created before the failure.
	partway := bridgeProgram("") + ""
	partway = replaceOnce(partway, "outputs:\n", `  broken:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: Not_A_Valid_Name
        namespace: ${namespace}
      data:
        # Known only once the first ConfigMap exists.
        uid: ${settings.metadata.uid}
    options:
      dependsOn:
        - ${settings}
outputs:
`)
	commit := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": partway}, "fails part-way")
	f.start(t)
	stack := f.stack("partway", func(s *v1alpha1.Stack) { s.Spec.DestroyOnDelete = true })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitNotReady(t, key, v1alpha1.ProgramErrorReason)
	g.Expect(s.Status.LastAppliedArtifact).To(BeNil())
	g.Expect(s.Status.LastAttemptedArtifact).NotTo(BeNil())
	g.Expect(s.Status.LastAttemptedArtifact.Revision).To(HaveSuffix(commit))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"), "created before the failure")

	g.Expect(env.Client.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &v1alpha1.Stack{}))
	}, 3*time.Minute, time.Second).Should(BeTrue())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "destroyed with the attempted program")
	g.Expect(f.ctrl.Operations(t, "destroy")).To(Equal(1))
}
