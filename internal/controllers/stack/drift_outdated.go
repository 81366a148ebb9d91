package stack

import (
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// DriftOutdatedReason is Drifted's reason (Unknown) after an up or a
// rollback changed resources since the last check found drift: what that
// check found was of the resources before, and the next check, made due at
// once, says what is drifted now.
const DriftOutdatedReason = "ChangedSinceCheck"

// driftAfterApply forgets a drift report that an up or a rollback (res, of
// revision) made stale. An operation that changed no resource leaves the
// report as it is: the resources are what the check saw. A report of no
// drift stays too: the operation put the program's values, not others.
// Otherwise status.drift's resources go (they may be repaired, replaced or
// gone), Drifted is Unknown, and the next check is due now, so that the
// reconcile after this one derives the drift again; with drift detection
// Disabled there is no schedule, and the message says how to check.
func (r *StackReconciler) driftAfterApply(st *reconcileState, res *runner.Result, revision string) {
	stack := st.stack
	if res == nil || !changedResources(res.Changes) || !driftReported(stack) {
		return
	}
	what := "up"
	if h := stack.Status.History; len(h) > 0 && h[0].Type == v1alpha1.OperationRollback {
		what = "rollback"
	}
	d := stack.Status.Drift
	if d == nil {
		d = &v1alpha1.DriftStatus{}
		stack.Status.Drift = d
	}
	d.Resources, d.Ignored, d.Total = nil, nil, 0
	stackDrifted.WithLabelValues(stack.Namespace, stack.Name).Set(0)
	next := "the next drift check, due now, says what is drifted"
	if stack.GetDriftMode() == v1alpha1.DriftDisabled {
		d.NextCheckAt = nil
		next = fmt.Sprintf("request a check (`stackpilot drift check %s -n %s`) to know what is drifted", stack.Name, stack.Namespace)
	} else {
		d.NextCheckAt = &metav1.Time{Time: time.Now()}
	}
	conditions.MarkUnknown(stack, v1alpha1.DriftedCondition, DriftOutdatedReason,
		"the %s of revision %s changed %s since the last check found drift; %s", what, revision, changeCount(res.Changes), next)
}

// driftReported is true when status holds drift found by a check, or a
// failed check left it unknown.
func driftReported(stack *v1alpha1.Stack) bool {
	if d := stack.Status.Drift; d != nil && (d.Total > 0 || len(d.Resources) > 0) {
		return true
	}
	c := conditions.Get(stack, v1alpha1.DriftedCondition)
	return c != nil && c.Status != metav1.ConditionFalse && c.Reason != DriftOutdatedReason
}

func changedResources(c runner.ChangeCounts) bool {
	return c.Create+c.Update+c.Replace+c.Delete > 0
}

func changeCount(c runner.ChangeCounts) string {
	return fmt.Sprintf("%d resource(s)", c.Create+c.Update+c.Replace+c.Delete)
}
