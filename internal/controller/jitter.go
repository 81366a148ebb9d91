package controller

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/jitter"
)

// jitteredResult moves the regular requeue at spec.interval by up to ±p % of
// it, so that Stacks created together, which would otherwise list their
// repository and run their no-op reconciles in the same instant interval
// after interval, spread over the interval instead.
//
// Only the interval is jittered, as in Flux. Retries keep their exact delay:
// a failure's backoff is derived again from status by decide at the next
// reconcile, so a requeue drawn early would wake the Stack only to find its
// retry not due and wait again, and a short requeue (a wait for a retry
// that is due in seconds) is no herd.
func jitteredResult(s summary, j jitter.Interval) ctrl.Result {
	if s.atInterval && s.result.RequeueAfter > 0 {
		s.result.RequeueAfter = j.Apply(s.result.RequeueAfter)
	}
	return s.result
}

// sourceMaxAge is how old a Git listing shared with other Stacks may be and
// still serve this Stack: the shortest jittered interval, not the interval.
//
// A Stack that wakes early (0.9 × interval after its previous reconcile, with
// 10 %) would otherwise find the listing that it fetched itself last time
// still fresh, and check its source only every other wake: a Stack alone on
// its repository would see a new commit up to 2.1 intervals late. With the
// shortest requeue as the bound, every wake sees a listing newer than the one
// it saw before. The price is that many Stacks on one repository list it at
// most once per shortest interval (0.9 × interval) instead of once per
// interval: at most 11 % more requests, however many Stacks share them.
func (r *StackReconciler) sourceMaxAge(stack *v1alpha1.Stack) time.Duration {
	return r.IntervalJitter.Shortest(stack.GetRequeueAfter())
}
