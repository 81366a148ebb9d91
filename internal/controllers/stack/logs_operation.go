package stack

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// beginLog is where the runner of operation id writes its engine log
// (runner.Spec.LogFile), in the Stack's part of the log store; "" when the
// controller keeps no logs or cannot keep this one (the operation runs
// anyway: a log is for people, never a reason to fail).
func (r *StackReconciler) beginLog(ctx context.Context, stack *v1alpha1.Stack, id string) string {
	if r.Logs == nil {
		return ""
	}
	path, err := r.Logs.Begin(string(stack.UID), id)
	if err != nil {
		log.FromContext(ctx).Error(err, "the operation runs without an engine log", "operation", id)
		return ""
	}
	return path
}

// endLog hands the finished log to the store: bounded, and the Stack's
// logs beyond the last ten removed.
func (r *StackReconciler) endLog(ctx context.Context, stack *v1alpha1.Stack, id string) {
	if r.Logs == nil {
		return
	}
	if err := r.Logs.End(string(stack.UID), id); err != nil {
		log.FromContext(ctx).Error(err, "keeping the engine log", "operation", id)
	}
}
