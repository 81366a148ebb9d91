package stack

import (
	"context"
	"fmt"
)

// routes maps each action decide can choose to the steps that act on it, in
// the order they run; each runs until one is done or fails (runSteps). This
// is the one place that looks at the decided action: no step checks it to
// skip itself. What an up hands on to when it ends is in hooks.go.
//
//   - none and skip: nothing to apply. The plan settles, the Stack is found
//     up to date (or the new revision is recorded as skipped), then a drift
//     check runs when due, and what it found drifted is remediated in
//     Remediate mode; else the published outputs are checked and restored.
//   - up: fetch the program, pass the approval gate (which may end it), run
//     the up, publish its outputs, run the drift check a person asked for in
//     the same reconcile, and remediate what it found.
//   - remediate, rollback, rolled-back, wait: each its own step.
func (r *StackReconciler) routes() map[Action][]stepFunc {
	return map[Action][]stepFunc{
		ActionNone:       {r.settle, r.upToDate, r.checkDrift, r.remediateDrift, r.restoreOutputs},
		ActionSkip:       {r.settle, r.skip, r.checkDrift, r.remediateDrift, r.restoreOutputs},
		ActionUp:         {r.fetchArtifact, r.gateApproval, r.runUp, r.publishOutputs, r.checkDriftAfterUp, r.remediateDrift},
		ActionRemediate:  {r.retryRemediate},
		ActionRollback:   {r.runRollback},
		ActionRolledBack: {r.holdRolledBack},
		ActionWait:       {r.waitForRetry},
	}
}

// act runs the steps of the action decide chose.
func (r *StackReconciler) act(ctx context.Context, st *reconcileState) (stepResult, error) {
	steps, ok := r.routes()[st.decision.Action]
	if !ok {
		// TestEveryActionIsRouted keeps this from happening.
		return stepDone, fmt.Errorf("no route for action %q", st.decision.Action)
	}
	return stepDone, r.runSteps(ctx, st, steps)
}
