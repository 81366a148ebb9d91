package stack

import "context"

// The steps of ActionNone and ActionSkip before their drift check and outputs
// (route.go): the applied program and inputs are the ones resolved now.

// settle ends what waited for a change that is no longer there: a remediate
// that failed while remediation was on, now off (decideRemediateOff), and a
// pending plan (settlePlan).
func (r *StackReconciler) settle(ctx context.Context, st *reconcileState) (stepResult, error) {
	if st.stack.Status.Failures > 0 && remediateOff(st.stack) {
		r.remediateStopped(st.stack)
	}
	r.settlePlan(st)
	return stepContinue, nil
}

// upToDate finds the Stack up to date at its applied revision (ActionNone).
func (r *StackReconciler) upToDate(ctx context.Context, st *reconcileState) (stepResult, error) {
	st.found(finding{kind: foundApplied, message: appliedMessage(st.stack)})
	return stepContinue, nil
}

// skip records a new revision that changed nothing under the program's paths
// as applied, with no up (ActionSkip, skipUp).
func (r *StackReconciler) skip(ctx context.Context, st *reconcileState) (stepResult, error) {
	if err := r.skipUp(ctx, st); err != nil {
		return stepDone, err
	}
	return stepContinue, nil
}
