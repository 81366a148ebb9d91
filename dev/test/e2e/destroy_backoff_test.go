package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestFailedDestroyBacksOff (issue 21, item 24): deleting a Stack whose
// stack holds a protected resource fails its destroy every time. The
// retries back off like other failures (spec.retryInterval, doubled per
// failure in a row), as the history's timestamps show, and Ready says how
// many failed and when the next comes; turning destroyOnDelete off lets the
// Stack go at once.
func TestFailedDestroyBacksOff(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const retry = 5 * time.Second
	f := newFixture(t)
	protected := replaceOnce(bridgeProgram(""), "      deleteBeforeReplace: true\n", "      deleteBeforeReplace: true\n      protect: true\n")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": protected}, "protected")
	f.start(t)
	logOnFailure(t, f)
	stack := f.stack("guarded", func(s *v1alpha1.Stack) {
		s.Spec.DestroyOnDelete = true
		s.Spec.RetryInterval = &metav1.Duration{Duration: retry}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, next)

	g.Expect(env.Client.Delete(ctx, stack)).To(Succeed())
	var destroys []v1alpha1.OperationRecord // failed ones, newest first
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		destroys = nil
		for _, h := range s.Status.History {
			if h.Type == v1alpha1.OperationDestroy && h.FinishedAt != nil {
				g.Expect(h.Outcome).To(Equal(v1alpha1.OutcomeFailed), "%+v", h)
				destroys = append(destroys, h)
			}
		}
		g.Expect(len(destroys)).To(BeNumerically(">=", 4), "Ready: %s", readyMessage(s))
	}, 6*time.Minute, time.Second).Should(Succeed())

	// Retry n+1 starts no sooner than retry·2^(n-1) after failure n ended
	// (the history's times are whole seconds: one second of slack).
	for i := len(destroys) - 1; i > 0; i-- {
		n := len(destroys) - i // failures in a row when destroys[i] ended
		wait := retry << (n - 1)
		gap := destroys[i-1].StartedAt.Sub(destroys[i].FinishedAt.Time)
		g.Expect(gap).To(BeNumerically(">=", wait-time.Second),
			"destroy %d started %s after failure %d ended; its backoff is %s", n+1, gap, n, wait)
	}
	s := getStack(g, key)
	g.Expect(conditions.GetReason(s, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.DestroyFailedReason))
	g.Expect(conditions.GetMessage(s, v1alpha1.ReadyCondition)).To(MatchRegexp(`\d+ failed destroy\(s\) in a row; retried in \d+s`))

	// A spec change ends the wait: without destroyOnDelete the Stack goes.
	g.Expect(env.Client.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"destroyOnDelete":false}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &v1alpha1.Stack{}))
	}, 2*time.Minute, time.Second).Should(BeTrue())
}
