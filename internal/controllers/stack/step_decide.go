package stack

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// resolveInputs reads the config, env and credentials the spec references.
func (r *StackReconciler) resolveInputs(ctx context.Context, st *reconcileState) (stepResult, error) {
	in, err := r.inputsResolver().resolve(ctx, st.stack)
	if err != nil {
		return stepDone, err
	}
	st.inputs = in
	return stepContinue, nil
}

// decide chooses what this reconcile does (decide.go); act runs the steps
// of that action (route.go). It only decides.
func (r *StackReconciler) decide(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	if err := stackChanged(stack, st.inputs); err != nil {
		return stepDone, err
	}
	// A failing remediate is retried only while remediation is on: turning
	// the mode to Detect or Disabled stops it (decideRemediateOff).
	remediateFailing := remediateFailing(stack)
	in := decideInput{
		Revision:                   st.revision,
		ProgramDigest:              st.programDigest,
		InputsDigest:               st.inputs.Digest,
		LastAppliedRevision:        stack.Status.LastAppliedRevision,
		LastAppliedProgramDigest:   stack.Status.LastAppliedProgramDigest,
		LastAppliedInputsDigest:    stack.Status.InputsDigest,
		LastAttemptedProgramDigest: stack.Status.LastAttemptedProgramDigest,
		LastAttemptedInputsDigest:  stack.Status.LastAttemptedInputsDigest,
		Failures:                   stack.Status.Failures,
		LastAttemptFinished:        lastAttemptFinished(stack),
		Interrupted:                st.recovered != nil || lastInterrupted(stack),
		// A drift check request is not a request to retry a failed up, but
		// it is one to retry a failed remediate.
		Requested:            isRequested(stack) && (!driftRequested(stack) || remediateFailing),
		LastAttemptRemediate: remediateFailing,
		RemediateOff:         remediateOff(stack),
		Now:                  time.Now(),
		RetryInterval:        stack.GetRetryInterval(),
		Interval:             stack.GetRequeueAfter(),
	}
	in.PolicyChanged = r.policyChanged(ctx, st)
	rollbackInput(stack, st, &in)
	st.decision = decide(in)
	return stepContinue, nil
}

// remediateFailing is true while a remediate is failing and remediation is
// still on: decide retries it as a remediate.
func remediateFailing(stack *v1alpha1.Stack) bool {
	return stack.GetDriftMode() == v1alpha1.DriftRemediate &&
		lastAttemptType(stack) == v1alpha1.OperationRemediate && stack.Status.Failures > 0
}

// remediateOff is true when the newest attempt is a remediate that did not
// succeed and remediation is off now: it is not retried (decideRemediateOff).
func remediateOff(stack *v1alpha1.Stack) bool {
	return stack.GetDriftMode() != v1alpha1.DriftRemediate && lastRemediateUnfinished(stack)
}

// lastAttemptFinished is when the newest finished attempt (an operation
// other than a drift check or a preview: they apply nothing) ended.
func lastAttemptFinished(stack *v1alpha1.Stack) time.Time {
	for _, h := range stack.Status.History {
		if h.FinishedAt != nil && h.Type != v1alpha1.OperationDriftCheck && h.Type != v1alpha1.OperationPreview {
			return h.FinishedAt.Time
		}
	}
	return time.Time{}
}

// lastRemediateUnfinished is true when the newest finished attempt (drift
// checks and skips left out) is a remediate that failed or was interrupted.
func lastRemediateUnfinished(stack *v1alpha1.Stack) bool {
	for _, h := range stack.Status.History {
		if h.FinishedAt != nil && h.Type != v1alpha1.OperationDriftCheck && h.Outcome != v1alpha1.OutcomeSkipped {
			return h.Type == v1alpha1.OperationRemediate && h.Outcome != v1alpha1.OutcomeSucceeded
		}
	}
	return false
}

// remediateStopped ends the failure run of a remediate that remediation,
// turned off, no longer retries: the applied revision is what the Stack
// applies, so it is Ready again (ActionNone's upToDate), with no failure
// left to back off from. Said once, in an event: the count is 0 afterwards.
func (r *StackReconciler) remediateStopped(stack *v1alpha1.Stack) {
	stack.Status.Failures = 0
	r.recordf(stack, corev1.EventTypeNormal, "RemediateStopped", string(v1alpha1.OperationRemediate),
		"the failed remediate of revision %s is not retried: spec.driftDetection.mode is %s", stack.Status.LastAppliedRevision, stack.GetDriftMode())
}

// lastAttemptType is the type of the newest finished attempt (drift checks
// and skips left out).
func lastAttemptType(stack *v1alpha1.Stack) v1alpha1.OperationType {
	for _, h := range stack.Status.History {
		if h.FinishedAt != nil && h.Type != v1alpha1.OperationDriftCheck && h.Outcome != v1alpha1.OutcomeSkipped {
			return h.Type
		}
	}
	return ""
}
