package stack

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/jitter"
)

// jitteredResult delays the regular requeue at spec.interval by up to p % of
// it (jitter.Interval says why never earlier), so that Stacks created together, which would otherwise list their
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
// still serve this Stack: its interval. Requeues are never earlier than the
// interval, so a Stack's own listing from its previous wake has always
// expired, and any listing younger than the interval was fetched by another
// Stack since: every wake sees a listing newer than the one it saw before, and
// the repository is listed once per interval however many Stacks share it.
func (r *StackReconciler) sourceMaxAge(stack *v1alpha1.Stack) time.Duration {
	return stack.GetRequeueAfter()
}
