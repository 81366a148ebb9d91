package stack

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The data dir and the Stack's status are written apart, and the controller
// may die between the two writes. Each file is written so that its status
// can be caught up with, in this order: a new file (a plan, the inputs of an
// up) is written before the status patch that names it, and the files it
// replaces are removed only after that patch has landed, here. So a crash
// leaves an extra file, never a status that names a file that is gone: the
// plan or the inputs a rollback needs.

// settleDataDir removes what the status, just written to the API server, no
// longer names: plans other than the pending one, and inputs other than the
// applied ones. Nothing runs then: no preview is making a plan, no up is
// keeping inputs.
func (r *StackReconciler) settleDataDir(ctx context.Context, stack *v1alpha1.Stack) {
	if stack.Status.CurrentOperation != nil || !stack.DeletionTimestamp.IsZero() {
		return
	}
	if r.Plans != nil {
		keep := ""
		if p := stack.Status.PendingPlan; p != nil {
			keep = p.ID
		}
		if err := r.Plans.Prune(stack.UID, keep); err != nil {
			log.FromContext(ctx).Error(err, "remove plans no status names")
		}
	}
	r.pruneInputs(ctx, stack.UID, stack.Status.InputsDigest)
}
