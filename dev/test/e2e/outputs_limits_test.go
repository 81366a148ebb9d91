package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// bigOutputProgram is the bridge program plus an output "big" of size bytes,
// a literal in the program.
func bigOutputProgram(size int) string {
	return replaceOnce(bridgeProgram(""), "outputs:\n",
		"variables:\n  big: "+strings.Repeat("x", size)+"\noutputs:\n  big: ${big}\n")
}

// TestOutputsOverOneMiB: a program whose outputs do not fit in a Secret. The
// up is applied once; publishing fails with a clear error (OutputsTooLarge,
// naming the output and its size, no value) before anything is written, and
// is retried from the stack's state with its own backoff, never by another
// up. status.outputs shows the large value as a note. A commit with smaller
// outputs publishes them.
func TestOutputsOverOneMiB(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": "s3cr3t-t0ken-value"})
	big := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bigOutputProgram(1200 * 1024)}, "big output")
	f.start(t)
	stack := f.stack("toobig", func(s *v1alpha1.Stack) {
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.OutputsTooLargeReason)
	g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(big), "the up is applied")
	c := conditions.Get(s, v1alpha1.OutputsPublishedCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(v1alpha1.OutputsTooLargeReason))
	g.Expect(c.Message).To(ContainSubstring("do not fit in Secret toobig-outputs: 1.2 MiB of data, over the 1 MiB a Secret can hold (largest: big (1.2 MiB)"))
	g.Expect(s.Status.Outputs["big"]).To(Equal("[omitted: 1.2 MiB; see Secret toobig-outputs]"))
	g.Expect(s.Status.Outputs).To(HaveKeyWithValue("color", `"blue"`))

	// Several retry intervals (2s, doubling): the publish is retried from the
	// stack's state, counted, and no second up runs.
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, key).Status.OutputsPublishFailures).To(BeNumerically(">=", 3))
	}, 2*time.Minute, time.Second).Should(Succeed())
	s = getStack(g, key)
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(1), "exactly one up")
	g.Expect(f.ctrl.Operations(t, "outputs")).To(BeNumerically(">=", 2), "retries read the outputs from the state")
	g.Expect(s.Status.Failures).To(BeZero(), "a publish failure is not an up failure")
	g.Expect(s.Status.LastAttemptedRevision).To(Equal(s.Status.LastAppliedRevision))
	g.Expect(readyMessage(s)).To(ContainSubstring("big (1.2 MiB)"))
	g.Expect(s.Status.History).To(HaveLen(1))
	for _, name := range []string{"toobig-outputs"} {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no half-written Secret")
		err = env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no half-written ConfigMap")
	}
	events := stackEvents(t, f.ns, key.Name)
	g.Expect(hasLine(events, v1alpha1.OutputsTooLargeReason+": ")).To(BeTrue(), "events: %v", events)
	g.Expect(strings.Count(f.ctrl.Logs(t), `"reason":"OutputsTooLarge"`)).To(BeNumerically(">=", 3), "each failed publish is logged")
	assertNoSecrets(t, f, key, "s3cr3t-t0ken-value", passphrase, strings.Repeat("x", 1000))

	// A commit with smaller outputs publishes them, and the failure is over.
	small := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bigOutputProgram(4 * 1024)}, "smaller output")
	requestReconcile(t, key)
	s = waitApplied(t, key, small)
	g.Expect(conditions.IsTrue(s, v1alpha1.OutputsPublishedCondition)).To(BeTrue())
	g.Expect(s.Status.OutputsPublishFailures).To(BeZero())
	g.Expect(s.Status.Outputs["big"]).To(Equal("[omitted: 4 KiB; see Secret toobig-outputs]"))
	var sec corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "toobig-outputs"}, &sec)).To(Succeed())
	g.Expect(sec.Data["big"]).To(HaveLen(4 * 1024))
	g.Expect(string(sec.Data["token"])).To(Equal("s3cr3t-t0ken-value"))
}

// TestOutputsConflict: two Stacks name one outputs Secret. The second cannot
// publish (OutputsConflict, naming the owner), is applied once and never
// re-runs its up; the first Stack's Secret is left alone.
func TestOutputsConflict(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	// Both programs are in the first revision the Stacks see (revisions are
	// resolved once per interval for all Stacks on one repository).
	both := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram(""), "other/Pulumi.yaml": replaceOnce(bridgeProgram(""), "name: app-settings", "name: other-settings")}, "other")
	first := f.stack("first")
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(first), both)
	ups := f.ctrl.Operations(t, "up")

	second := f.stack("second", func(s *v1alpha1.Stack) {
		s.Spec.Outputs = &v1alpha1.OutputsTarget{SecretName: "first-outputs"}
		s.Spec.Source.Dir = "other" // its program's ConfigMap must not clash with the first's
	})
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	key := client.ObjectKeyFromObject(second)
	s := waitNotReady(t, key, v1alpha1.OutputsConflictReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("the outputs Secret first-outputs is controlled by Stack first, not by this Stack"))
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, key).Status.OutputsPublishFailures).To(BeNumerically(">=", 3))
	}, 2*time.Minute, time.Second).Should(Succeed())
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups+1), "the second Stack's up ran once")
	var sec corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "first-outputs"}, &sec)).To(Succeed())
	g.Expect(metav1.IsControlledBy(&sec, getStack(g, client.ObjectKeyFromObject(first)))).To(BeTrue())

	// Naming a Secret of its own publishes there, from the state, no up.
	g.Expect(env.Client.Patch(ctx, getStack(g, key), client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"outputs":{"secretName":"second-outputs"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(conditions.IsTrue(s, v1alpha1.OutputsPublishedCondition)).To(BeTrue(), "OutputsPublished")
		g.Expect(conditions.IsReady(s)).To(BeTrue(), "Ready: %s", readyMessage(s))
	}, time.Minute, time.Second).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "second-outputs"}, &sec)).To(Succeed())
	g.Expect(string(sec.Data["configMap"])).To(Equal("other-settings"))
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups+1), "still one up for the second Stack")
}

// TestDirAppearsInLaterCommit: a Stack whose dir is missing at the current
// revision is Stalled for that revision; so is one whose dir has no
// Pulumi.yaml. Each new commit is seen at spec.interval, without touching the
// Stack, and the commit that adds the program is applied.
func TestDirAppearsInLaterCommit(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("later", func(s *v1alpha1.Stack) {
		s.Spec.Source.Dir = "later"
		s.Spec.Interval = metav1.Duration{Duration: 3 * time.Second}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.ArtifactFailedReason)
	g.Expect(conditions.IsStalled(s)).To(BeTrue())
	g.Expect(readyMessage(s)).To(ContainSubstring(`spec.source.dir "later" in revision main@sha1:` + f.commit))

	f.git.Commit(t, "infra", "main", map[string]string{"later/README.md": "soon"}, "folder without a program")
	s = waitNotReady(t, key, v1alpha1.ProgramErrorReason)
	g.Expect(conditions.IsStalled(s)).To(BeTrue())
	g.Expect(readyMessage(s)).To(ContainSubstring("no Pulumi.yaml"))
	g.Expect(f.ctrl.Operations(t, "")).To(BeZero(), "no runner for a revision without a program")

	added := f.git.Commit(t, "infra", "main", map[string]string{"later/Pulumi.yaml": bridgeProgram("")}, "add the program")
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(conditions.IsReady(s)).To(BeTrue(), "Ready: %s", readyMessage(s))
		g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(added))
		g.Expect(conditions.IsStalled(s)).To(BeFalse())
	}, 2*time.Minute, time.Second).Should(Succeed())
	g.Expect(getStack(g, key).Generation).To(Equal(int64(1)), "the Stack was not touched")
}

// TestFailureEventAndLog: an up whose Pulumi diagnostics are longer than an
// event may be still gets its failure event (first line, pointing to the
// status); the failed reconcile is logged once, with its reason, and no
// secret value is in the event or the log.
func TestFailureEventAndLog(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t)
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": "s3cr3t-t0ken-value"})
	// Pulumi YAML stops at the first error; a long name makes it long: the
	// name is in the first line and again in the quoted source line.
	undefined := "undefinedVariableWithARatherLongName" + strings.Repeat("X", 600)
	f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        broken: ${" + undefined + "}")}, "broken")
	f.start(t)
	stack := f.stack("noisy", func(s *v1alpha1.Stack) {
		s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	})
	g.Expect(env.Client.Create(context.Background(), stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.ProgramErrorReason)
	g.Expect(len(s.Status.History[0].Message)).To(BeNumerically(">", 1024), "the diagnostics are longer than an event note may be: %s", s.Status.History[0].Message)
	var failure string
	g.Eventually(func(g Gomega) {
		for _, e := range stackEvents(t, f.ns, key.Name) {
			if strings.HasPrefix(e, v1alpha1.ProgramErrorReason+": up ") {
				failure = e
			}
		}
		g.Expect(failure).NotTo(BeEmpty(), "the failure event is recorded")
	}, 30*time.Second, time.Second).Should(Succeed())
	g.Expect(failure).To(ContainSubstring(undefined+`" not found (see the Stack's status for the rest)`), "the first line, pointing to the status")

	// One failed reconcile (retryInterval is an hour), one log line for it.
	logs := f.ctrl.Logs(t)
	var lines []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"msg":"reconcile failed"`) && strings.Contains(l, `"stack":"`+f.ns+`/noisy"`) {
			lines = append(lines, l)
		}
	}
	g.Expect(lines).To(HaveLen(int(getStack(g, key).Status.Failures)), "one line per failed reconcile")
	g.Expect(lines).To(HaveLen(1))
	g.Expect(lines[0]).To(ContainSubstring(`"reason":"ProgramError"`))
	g.Expect(lines[0]).To(ContainSubstring(undefined))
	assertNoSecrets(t, f, key, "s3cr3t-t0ken-value", passphrase)
}
