package stack

import (
	"context"
	"time"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// What an up of a change (runUp) hands on to when it ends, in order. These
// are the only places where the up touches rollback, approval and drift.

// upSucceeded runs after an up applied the change, its status recorded:
//   - its inputs are kept, for a later rollback to this revision
//     (inputs_snapshot.go);
//   - the approved plan it applied, if any, is ended (step_approval.go),
//     and so are the reviewed plans of pull requests (reviewed.go);
//   - a drift report of the resources before is marked stale, and the next
//     drift check is scheduled (driftAfterApplied).
func (r *StackReconciler) upSucceeded(ctx context.Context, st *reconcileState, res *runner.Result) {
	r.keepInputs(ctx, st)
	if st.approved != nil {
		r.planApplied(st, res)
	}
	r.reviewedApplied(st)
	r.driftAfterApplied(ctx, st, res, st.revision)
}

// upFailed runs after an up failed:
//   - the next reconcile comes at once when this failure makes a rollback
//     due (rollbackSoon, step_rollback.go): the last good revision should
//     not wait out a retryInterval;
//   - the approved plan it applied, if any, stays approved or is dropped as
//     no longer valid (planFailed, step_approval.go); a reviewed plan that
//     no longer holds is dropped (reviewedFailed, reviewed.go).
func (r *StackReconciler) upFailed(st *reconcileState, err error) {
	rollbackSoon(st)
	if st.approved != nil {
		r.planFailed(st, err)
	}
	r.reviewedFailed(st, err)
}

// driftAfterApplied follows an operation that applied revision (an up, or a
// rollback): a drift report of the resources before is stale
// (drift_outdated.go), and the next check is scheduled, its time in status
// at once: the reconcile that runs it comes then, not at spec.interval.
func (r *StackReconciler) driftAfterApplied(ctx context.Context, st *reconcileState, res *runner.Result, revision string) {
	r.driftAfterApply(st, res, revision)
	stack := st.stack
	if stack.GetDriftMode() != v1alpha1.DriftDisabled {
		requeueBy(st, stack, time.Until(r.scheduleDrift(ctx, stack, time.Now(), false)))
	}
}
