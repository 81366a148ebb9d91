package stack

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// StateRepairedReason is the event reason of an operation before which the
// runner repaired a file:// backend's state that a killed write had left
// broken (runner.Result.Repairs: an empty sidecar, a stale temporary file).
const StateRepairedReason = "StateRepaired"

// recordRepairs puts what the runner repaired before the operation into the
// operation's history record and an event: a person who finds the backend's
// files changed learns who changed them and why. Nothing when it repaired
// nothing.
func (r *StackReconciler) recordRepairs(stack *v1alpha1.Stack, rec *v1alpha1.OperationRecord, res *runner.Result) {
	if len(res.Repairs) == 0 {
		return
	}
	note := fmt.Sprintf("repaired the state before the operation: %s", strings.Join(res.Repairs, "; "))
	rec.Message = truncate(strings.TrimSpace(rec.Message+" ("+note+")"), 2000)
	replaceHistory(stack, *rec)
	r.recordf(stack, corev1.EventTypeWarning, StateRepairedReason, string(rec.Type), "%s %s: %s", rec.Type, rec.ID, note)
}
