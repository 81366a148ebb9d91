package stack

import (
	"context"
	"errors"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// waitForRetry is ActionWait's step: the last attempt at these very program
// and inputs failed, and its retry is not due. Ready keeps the failure's
// reason and message; the reconcile comes back when the retry is due.
func (r *StackReconciler) waitForRetry(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	reason, msg := v1alpha1.OperationFailedReason, "the last operation failed"
	if c := st.currentReady(); c != nil && c.Status != "True" {
		reason, msg = c.Reason, c.Message
	}
	if reason == v1alpha1.StackClaimedReason {
		// Still another Stack's as far as we know: stay Stalled, not waiting.
		return stepDone, &StallingError{Reason: reason, Err: errors.New(msg)}
	}
	// Checks go on while a newer change waits for its retry: they look at
	// the applied revision, and find no remediate (not on this route): it
	// waits for the retry. Not while a remediate waits for its retry: its
	// refresh wrote the real state into the stack, and a check would report
	// the drift gone.
	if !remediateFailing(stack) {
		if err := r.driftIfDue(ctx, st); err != nil {
			return stepDone, err
		}
	}
	return stepDone, &WaitingError{Reason: reason, Err: errors.New(msg), RequeueAfter: st.decision.RequeueAfter}
}
