package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// twoNewConfigMaps adds to the bridge program one ConfigMap that is created at
// once and one that never becomes ready (it waits for a label nobody sets),
// so the up fails at its 40 s create timeout with one create done and one
// started.
const twoNewConfigMaps = `
  created:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: created-at-once
        namespace: ${namespace}
      data:
        ready: "yes"
  neverReady:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: never-ready
        namespace: ${namespace}
        annotations:
          pulumi.com/waitFor: "jsonpath={.metadata.labels.proceed}=yes"
      data:
        ready: "no"
    options:
      customTimeouts:
        create: 40s
`

// TestLiveCountsOnlyFinishedSteps: the live counts of a running up, and the
// record of the failed up, count a resource step only once it has succeeded:
// a create that is still waiting, then fails, is never counted as created.
func TestLiveCountsOnlyFinishedSteps(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	stack := f.stack("counted", func(s *v1alpha1.Stack) {
		s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour} // one failed up, no retry
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	program := replaceOnce(bridgeProgram(""), "\noutputs:", twoNewConfigMaps+"outputs:")
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": program}, "two more ConfigMaps")

	// Watch the live counts from before the up starts until its record lands.
	var (
		mu       sync.Mutex
		maxLive  int64
		liveSeen bool
	)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			s := &v1alpha1.Stack{}
			if err := env.Client.Get(ctx, key, s); err == nil {
				if op := s.Status.CurrentOperation; op != nil && op.Changes != nil {
					mu.Lock()
					liveSeen = true
					maxLive = max(maxLive, op.Changes.Create)
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	requestReconcile(t, key)

	var failed *v1alpha1.OperationRecord
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.CurrentOperation).To(BeNil())
		g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(next))
		g.Expect(s.Status.History).NotTo(BeEmpty())
		g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeFailed), "history: %+v", s.Status.History[0])
		failed = &s.Status.History[0]
	}, 4*time.Minute, time.Second).Should(Succeed())
	close(stop)
	<-watched

	mu.Lock()
	defer mu.Unlock()
	g.Expect(liveSeen).To(BeTrue(), "the running up published live counts")
	g.Expect(maxLive).To(Equal(int64(1)), "live creates: the waiting ConfigMap is not counted before it is ready")
	g.Expect(failed.Changes).NotTo(BeNil())
	g.Expect(failed.Changes.Create).To(Equal(int64(1)), "the failed up created one ConfigMap: %+v", *failed.Changes)
}
