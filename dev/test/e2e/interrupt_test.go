package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestInterruptedTwiceBacksOff: an operation that keeps dying (here the
// controller is killed; an out-of-memory runner looks the same) is counted
// like a failure: the first interruption runs again at once, the second in a
// row waits out the backoff instead of looping. New inputs still run at once.
func TestInterruptedTwiceBacksOff(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	// The ConfigMap is ready once labelled proceed=yes, and the program sets
	// that label from config: "no" makes every up wait, holding the lock.
	program := replaceOnce(bridgeProgram("\n        size: gated"), "config:\n", "config:\n  proceed:\n    type: string\n    default: \"yes\"\n")
	program = replaceOnce(program, "        name: app-settings\n", "        name: app-settings\n        labels:\n          proceed: ${proceed}\n"+
		"        annotations:\n          pulumi.com/waitFor: \"jsonpath={.metadata.labels.proceed}=yes\"\n")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": program}, "gated by config")
	f.start(t)
	stack := f.stack("dying", func(s *v1alpha1.Stack) { s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, next)
	locks := filepath.Join(f.dataDir, "state", f.ns, ".pulumi", "locks", "organization", "bridge", "dying", "*.json")

	// New inputs start the up at once; a reconcile request instead would stay
	// pending through the kills (its handling is recorded at the end of the
	// reconcile), and a pending request rightly skips the backoff.
	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"config":{"proceed":"no"}}}`)))).To(Succeed())
	running := func(notID string) string {
		var id string
		g.Eventually(func(g Gomega) {
			s := getStack(g, key)
			g.Expect(s.Status.CurrentOperation).NotTo(BeNil())
			g.Expect(s.Status.CurrentOperation.ID).NotTo(Equal(notID))
			id = s.Status.CurrentOperation.ID
		}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
		return id
	}
	// holdsLock waits until the running up holds the stack's lock: exactly
	// one lock, and not the one an earlier run left (a run clears that lock
	// before its CLI takes its own, so a kill in between would leave none).
	holdsLock := func(earlier string) string {
		var held string
		g.Eventually(func(g Gomega) {
			m, _ := filepath.Glob(locks)
			g.Expect(m).To(HaveLen(1))
			g.Expect(m[0]).NotTo(Equal(earlier), "the earlier run's lock is still there")
			held = m[0]
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		time.Sleep(2 * time.Second) // the ConfigMap applied, the provider waiting
		return held
	}
	first := running("")
	firstLock := holdsLock("")
	f.ctrl.Kill()

	// First interruption: the up runs again at once, and hangs again (on the
	// lock of this new run, which is killed once it holds it).
	f.start(t)
	second := running(first)
	holdsLock(firstLock)                                               // the first run's lock is gone, this run's is there
	g.Expect(getStack(g, key).Status.History[0].Message).To(Equal("")) // still running
	g.Expect(getStack(g, key).Status.CurrentOperation.ID).To(Equal(second))
	s := getStack(g, key)
	g.Expect(s.Status.Failures).To(Equal(int64(1)))
	g.Expect(s.Status.CurrentOperation.Host).NotTo(BeEmpty(), "the operation says where it runs")
	f.ctrl.Kill()

	// Second in a row: counted, and no up until the backoff (an hour) is over.
	f.start(t)
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.CurrentOperation).To(BeNil())
		g.Expect(s.Status.Failures).To(Equal(int64(2)), "history: %+v", s.Status.History)
		g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
		g.Expect(s.Status.History[1].Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Consistently(func() int { return f.ctrl.Operations(t, "up") }, 8*time.Second, time.Second).Should(BeZero(),
		"the second interruption in a row backs off")

	// New inputs run at once, clearing the dead run's lock.
	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"config":{"proceed":"yes"}}}`)))).To(Succeed())
	s = waitApplied(t, key, next)
	g.Expect(s.Status.Failures).To(BeZero())
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(s.Status.History[0].Message).To(ContainSubstring("stale lock"))
	g.Expect(filepath.Glob(locks)).To(BeEmpty())
}
