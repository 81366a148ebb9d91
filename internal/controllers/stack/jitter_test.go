package stack

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/jitter"
)

// Many Stacks created together, all up to date: their next reconciles spread
// over [1, 1.1] × interval and never leave it.
func TestIntervalRequeueIsJittered(t *testing.T) {
	g := NewWithT(t)
	const interval = 10 * time.Minute
	j, err := jitter.New(10)
	g.Expect(err).NotTo(HaveOccurred())
	lo, hi := 10*time.Minute, 11*time.Minute
	seen := map[time.Duration]bool{}
	var below, above int
	for i := range 1000 {
		stack := jitterStack(fmt.Sprintf("s%d", i), interval)
		for _, recErr := range []error{nil, stallingAt("main@sha1:abc", v1alpha1.ArtifactFailedReason, "no dir")} {
			d := jitteredResult(summarizeStatus(stack, recErr, 0, func(m string) string { return m }), j).RequeueAfter
			g.Expect(d).To(And(BeNumerically(">=", lo), BeNumerically("<=", hi)), "stack %d, %v", i, recErr)
			seen[d] = true
			if d < interval+interval/40 {
				below++
			}
			if d > interval+interval/40*3 {
				above++
			}
		}
	}
	g.Expect(len(seen)).To(BeNumerically(">", 1900), "2000 requeues, nearly all different")
	// About a quarter each lies below 1.025 and above 1.075 × interval.
	g.Expect(below).To(BeNumerically("~", 500, 100))
	g.Expect(above).To(BeNumerically("~", 500, 100))
}

// 0 disables jitter: the regular requeue is the interval exactly.
func TestIntervalJitterZeroIsExact(t *testing.T) {
	g := NewWithT(t)
	const interval = 3 * time.Minute
	zero, err := jitter.New(0)
	g.Expect(err).NotTo(HaveOccurred())
	for _, j := range []jitter.Interval{zero, {}} {
		for range 100 {
			s := summarizeStatus(jitterStack("s", interval), nil, 0, func(m string) string { return m })
			g.Expect(jitteredResult(s, j).RequeueAfter).To(Equal(interval))
		}
	}
}

// Retries, backoff waits and a step's own requeue are exact: decide derives
// the backoff again from status, and a requeue drawn early would only wake
// the Stack to wait again.
func TestRetriesAreNotJittered(t *testing.T) {
	g := NewWithT(t)
	const interval = 10 * time.Minute
	j, _ := jitter.New(50)
	for name, tc := range map[string]struct {
		err     error
		requeue time.Duration
		want    time.Duration
	}{
		"a step's requeue":     {nil, 5 * time.Second, 5 * time.Second},
		"a failure's backoff":  {transient(v1alpha1.OperationFailedReason, errors.New("boom")), 4 * time.Minute, 4 * time.Minute},
		"a failure at retry":   {transient(v1alpha1.OperationFailedReason, errors.New("boom")), 0, time.Minute},
		"a wait for the retry": {&WaitingError{Reason: v1alpha1.OperationFailedReason, Err: errors.New("x"), RequeueAfter: 42 * time.Second}, 0, 42 * time.Second},
		"a backoff at its cap": {&WaitingError{Reason: v1alpha1.OperationFailedReason, Err: errors.New("x"), RequeueAfter: interval}, 0, interval},
		"stalled, no revision": {stalling(v1alpha1.InvalidSpecReason, "bad"), 0, 0},
	} {
		for range 50 {
			s := summarizeStatus(jitterStack("s", interval), tc.err, tc.requeue, func(m string) string { return m })
			g.Expect(jitteredResult(s, j).RequeueAfter).To(Equal(tc.want), name)
		}
	}
}

func jitterStack(name string, interval time.Duration) *v1alpha1.Stack {
	return &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 1,
			Finalizers: []string{v1alpha1.StackFinalizer}},
		Spec: v1alpha1.StackSpec{Interval: metav1.Duration{Duration: interval}},
	}
}
