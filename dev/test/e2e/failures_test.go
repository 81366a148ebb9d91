package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestNothingChangedRunsNothing: three intervals with no new commit and no new
// input start no runner process, and the Git server sees about one ls-remote per
// interval.
func TestNothingChangedRunsNothing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t)
	f.start(t)
	stack := f.stack("idle", func(s *v1alpha1.Stack) { s.Spec.Interval = metav1.Duration{Duration: 4 * time.Second} })
	g.Expect(env.Client.Create(context.Background(), stack)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(stack), f.commit)

	runs, requests := f.ctrl.Operations(t, ""), f.git.Requests()
	g.Expect(runs).To(Equal(1))
	time.Sleep(3*4*time.Second + 2*time.Second)
	g.Expect(f.ctrl.Operations(t, "")).To(Equal(runs), "no runner process starts when nothing changed")
	lsRemotes := f.git.Requests() - requests
	g.Expect(lsRemotes).To(BeNumerically(">=", 2), "the source is still checked every interval")
	g.Expect(lsRemotes).To(BeNumerically("<=", 5), "one ls-remote per interval, no clone")
	s := getStack(g, client.ObjectKeyFromObject(stack))
	g.Expect(s.Status.History).To(HaveLen(1))
}

// TestProgramErrorThenFix: a broken program is Ready=False with Pulumi's own
// diagnostic; a fixing commit makes it Ready without waiting out the backoff.
func TestProgramErrorThenFix(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t)
	broken := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        broken: ${doesNotExist}")}, "broken")
	f.start(t)
	stack := f.stack("broken", func(s *v1alpha1.Stack) { s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(context.Background(), stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.ProgramErrorReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("doesNotExist"), "Pulumi's diagnostic is in the message")
	g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(broken))
	g.Expect(s.Status.LastAppliedRevision).To(BeEmpty())
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeFailed))
	g.Expect(s.Status.History[0].Reason).To(Equal(v1alpha1.ProgramErrorReason))

	// retryInterval is an hour: only the new revision can explain a quick run.
	fixed := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("")}, "fix")
	requestReconcile(t, key)
	s = waitApplied(t, key, fixed)
	g.Expect(s.Status.Failures).To(BeZero())
}

// TestGitAuthFailure: refused credentials give a clear reason without the
// password; fixing the Secret recovers on its own (the Secret is watched).
func TestGitAuthFailure(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, testenv.WithBasicAuth("deploy", "right-password-123"))
	createSecret(t, f.ns, "git-creds", map[string]string{"username": "deploy", "password": "wrong-password-456"})
	f.start(t)
	stack := f.stack("auth", func(s *v1alpha1.Stack) {
		s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git-creds"}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.AuthenticationFailedReason)
	g.Expect(readyMessage(s)).NotTo(ContainSubstring("wrong-password-456"))
	g.Expect(f.ctrl.Operations(t, "")).To(BeZero(), "no Pulumi run without a source")

	var sec corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "git-creds"}, &sec)).To(Succeed())
	sec.Data["password"] = []byte("right-password-123")
	g.Expect(env.Client.Update(ctx, &sec)).To(Succeed())
	waitApplied(t, key, f.commit)
	assertNoSecrets(t, f, key, "wrong-password-456", "right-password-123", passphrase)
}

// TestSuspendResume: a suspended Stack runs nothing; resuming applies what came
// in meanwhile.
func TestSuspendResume(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("suspend", func(s *v1alpha1.Stack) { s.Spec.Interval = metav1.Duration{Duration: 3 * time.Second} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(conditions.GetReason(s, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.SuspendedReason))
	}, time.Minute, time.Second).Should(Succeed())
	runs := f.ctrl.Operations(t, "")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: small")}, "while suspended")
	time.Sleep(8 * time.Second)
	g.Expect(f.ctrl.Operations(t, "")).To(Equal(runs), "suspended: no run")
	g.Expect(getStack(g, key).Status.LastAppliedRevision).To(HaveSuffix(f.commit))

	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
	waitApplied(t, key, next)
}

// TestDestroyAfterRepositoryGone: destroyOnDelete works from the cached artifact
// when the Git repository no longer exists.
func TestDestroyAfterRepositoryGone(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("gone", func(s *v1alpha1.Stack) { s.Spec.DestroyOnDelete = true })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKey("color"))

	f.git.Delete(t, "infra")
	g.Expect(env.Client.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &v1alpha1.Stack{}))
	}, 3*time.Minute, time.Second).Should(BeTrue())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "destroyed from the cached artifact")
}

// TestNamespaceDeletedWithItsInputs: the namespace controller deletes a
// namespace's objects all at once, so the passphrase Secret a destroy needs can
// be gone before the Stack's finalizer runs. Deleting the Stack alone then
// waits (DestroyFailed: the Secret can come back); deleting its namespace lets
// the Stack go without a destroy, saying so, instead of holding the namespace
// in Terminating for ever.
func TestNamespaceDeletedWithItsInputs(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("orphaned", func(s *v1alpha1.Stack) { s.Spec.DestroyOnDelete = true })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "pulumi-passphrase"}}
	g.Expect(env.Client.Delete(ctx, secret)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, stack)).To(Succeed())
	s := waitNotReady(t, key, v1alpha1.DestroyFailedReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("Secret pulumi-passphrase not found"))
	g.Expect(s.Finalizers).To(ContainElement(v1alpha1.StackFinalizer), "the Stack waits for its Secret")

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}
	g.Expect(env.Client.Delete(ctx, ns)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}))
	}, 2*time.Minute, time.Second).Should(BeTrue(), "the namespace stays Terminating")
	g.Expect(f.ctrl.Logs(t)).To(ContainSubstring("was NOT destroyed"), "the controller says what it left behind")
}

// TestControllerKilledMidUp: the controller dies while an up waits on a
// resource; the next controller finds the operation interrupted, clears the
// stale lock and finishes the job.
func TestControllerKilledMidUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("crash")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	// The new revision's ConfigMap is only ready once it carries proceed=yes:
	// the provider applies it, then waits, and we kill the controller then.
	gated := bridgeProgram("\n        size: gated") + ""
	gated = replaceOnce(gated, "        name: app-settings\n", "        name: app-settings\n        annotations:\n          pulumi.com/waitFor: \"jsonpath={.metadata.labels.proceed}=yes\"\n")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": gated}, "gated")
	requestReconcile(t, key)
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, key).Status.CurrentOperation).NotTo(BeNil())
		g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "gated"))
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	f.ctrl.Kill()

	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &cm)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, &cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"proceed":"yes"}}}`)))).To(Succeed())

	f.start(t)
	s := waitApplied(t, key, next)
	g.Expect(s.Status.CurrentOperation).To(BeNil())
	var interrupted int
	for _, h := range s.Status.History {
		if h.Outcome == v1alpha1.OutcomeInterrupted {
			interrupted++
			g.Expect(h.Reason).To(Equal(v1alpha1.InterruptedReason))
		}
	}
	g.Expect(interrupted).To(Equal(1), "history: %+v", s.Status.History)
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
}

// TestInvalidSpecStalls: a spec the API server accepts but the controller cannot
// act on is Stalled with a message naming the field; fixing it recovers.
func TestInvalidSpecStalls(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("invalid", func(s *v1alpha1.Stack) {
		s.Spec.Config["bad:key:here"] = apiextensionsv1.JSON{Raw: []byte(`1`)}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.InvalidSpecReason)
	g.Expect(conditions.IsStalled(s)).To(BeTrue())
	g.Expect(readyMessage(s)).To(ContainSubstring(`spec.config: key "bad:key:here"`))
	g.Expect(f.ctrl.Operations(t, "")).To(BeZero())

	g.Expect(env.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"config":{"bad:key:here":null}}}`)))).To(Succeed())
	s = waitApplied(t, key, f.commit)
	g.Expect(conditions.IsStalled(s)).To(BeFalse())
}
