package stack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// runRollback runs the rollback decide chose (ActionRollback). It ends the
// reconcile: the change now resolved is not to be applied. It ends in a
// StallingError for the revision, whose event (summarize) tells of the
// rollback or its failure.
func (r *StackReconciler) runRollback(ctx context.Context, st *reconcileState) (stepResult, error) {
	return stepDone, r.rollback(ctx, st)
}

// rollbackInput adds what decide needs of spec.rollback and status.rollback.
func rollbackInput(stack *v1alpha1.Stack, st *reconcileState, in *decideInput) {
	in.RollbackAfter = stack.RollbackAfter()
	in.HasApplied = stack.Status.LastAppliedArtifact != nil
	for _, h := range stack.Status.History {
		if h.FinishedAt == nil || h.Type == v1alpha1.OperationDriftCheck || h.Outcome == v1alpha1.OutcomeSkipped {
			continue
		}
		if in.LastAttemptType == "" {
			in.LastAttemptType, in.LastAttemptOutcome = h.Type, h.Outcome
			if cutShort(h) {
				// Cancelled by a shutdown is interrupted, as after a crash.
				in.LastAttemptOutcome = v1alpha1.OutcomeInterrupted
			}
			if h.Type == v1alpha1.OperationUp && !rollbackFor(h.Reason) {
				// Nothing of the change was applied (the backend or its
				// lock refused the up): retried with backoff, not rolled back.
				in.LastAttemptOutcome = ""
			}
		}
		if h.Type != v1alpha1.OperationRollback || !cutShort(h) {
			break
		}
		in.InterruptedRollbacks++
	}
	rb := stack.Status.Rollback
	in.RolledBack = rb != nil && st.inputs != nil &&
		rb.FailedProgramDigest == st.programDigest && rb.FailedInputsDigest == st.inputs.Digest
}

// rollbackFor is false for the failures of an up that changed nothing: the
// backend or its lock refused it, or the stack is another Stack's.
func rollbackFor(reason string) bool {
	switch reason {
	case v1alpha1.LockedReason, v1alpha1.BackendFailedReason, v1alpha1.StackClaimedReason:
		return false
	}
	return true
}

// rollbackSoon makes the next reconcile come at once when the up that just
// failed makes a rollback due: the last good revision should not wait out a
// retryInterval.
func rollbackSoon(st *reconcileState) {
	stack := st.stack
	if stack.RollbackAfter() == 0 || st.inputs == nil {
		return
	}
	in := decideInput{
		Revision: st.revision, ProgramDigest: st.programDigest, InputsDigest: st.inputs.Digest,
		LastAppliedProgramDigest: stack.Status.LastAppliedProgramDigest, LastAppliedInputsDigest: stack.Status.InputsDigest,
		LastAttemptedProgramDigest: stack.Status.LastAttemptedProgramDigest, LastAttemptedInputsDigest: stack.Status.LastAttemptedInputsDigest,
		Failures: stack.Status.Failures,
	}
	rollbackInput(stack, st, &in)
	if d, ok := decideRollback(in); ok && d.Action == ActionRollback {
		st.requeueAfter = time.Second
	}
}

// failedChange is the change a rollback takes back.
type failedChange struct {
	revision, programDigest, inputsDigest string
	failures                              int64
	artifact                              *v1alpha1.ArtifactReference
}

// rollback applies the last applied program (from the artifact cache by
// digest, fetched again at its revision if the cache lost it) with the last
// applied inputs, recorded in the history as a rollback. The failed change
// stays the attempted one with its failure count: a rollback is not an
// attempt at it, and must not make it look applied or fixed. Success or
// failure, the change is then held (decide: ActionRolledBack).
func (r *StackReconciler) rollback(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	failed := failedChange{
		revision: stack.Status.LastAttemptedRevision, programDigest: st.programDigest, inputsDigest: st.inputs.Digest,
		failures: stack.Status.Failures, artifact: stack.Status.LastAttemptedArtifact,
	}
	if prev := stack.Status.Rollback; prev != nil && rerunningRollback(stack) && !attemptedIs(stack, prev) {
		// An interrupted rollback runs again. When a crash cut it short, the
		// attempted revision is the restored one (and its failures were
		// counted afresh); the failed change is in status.rollback. (A
		// shutdown's cancel put the failed change back itself.)
		failed.revision = prev.FailedRevision
		failed.failures = max(stack.Status.Failures-1, stack.RollbackAfter())
		failed.artifact = nil
	}
	restoredRevision := stack.Status.LastAppliedRevision
	rb := &v1alpha1.RollbackStatus{
		FailedRevision: failed.revision, FailedProgramDigest: failed.programDigest, FailedInputsDigest: failed.inputsDigest,
		RestoredRevision: restoredRevision, RestoredInputsDigest: stack.Status.InputsDigest,
		At: metav1.Now(), Outcome: v1alpha1.OutcomeRunning,
	}
	stack.Status.Rollback = rb
	keepFailed := func() {
		stack.Status.LastAttemptedRevision = failed.revision
		stack.Status.LastAttemptedProgramDigest = failed.programDigest
		stack.Status.LastAttemptedInputsDigest = failed.inputsDigest
		stack.Status.Failures = failed.failures
		if failed.artifact != nil {
			stack.Status.LastAttemptedArtifact = failed.artifact
		}
	}

	art, err := r.appliedArtifact(ctx, stack)
	if err != nil {
		return r.rollbackRefused(ctx, st, fmt.Sprintf("the program of revision %s is not in the artifact cache and cannot be fetched again: %v", restoredRevision, err))
	}
	restored, err := r.restoredInputs(ctx, st)
	if errors.Is(err, errInputsNotKept) {
		return r.rollbackRefused(ctx, st, fmt.Sprintf(
			"the inputs of revision %s are not kept (data dir reset, or spec.rollback enabled after it was applied): put the config and env back as they were when %s was applied, or fix the change; a reconcile request tries revision %s again",
			restoredRevision, restoredRevision, failed.revision))
	}
	if err != nil {
		return r.rollbackRefused(ctx, st, fmt.Sprintf("the inputs of revision %s: %v", restoredRevision, err))
	}

	current, currentProgram := st.inputs, st.programDigest
	run := rollbackInputs(restored, current)
	st.inputs, st.programDigest = run, stack.Status.LastAppliedProgramDigest
	res, opErr := r.operateWith(ctx, st, runner.OpUp, art, restoredRevision, opOptions{record: v1alpha1.OperationRollback})
	ctx = st.stepContext(ctx) // it may have ended during a shutdown: its publish must land
	st.inputs, st.programDigest = current, currentProgram
	if restored != current {
		current.Secrets = append(current.Secrets, restored.Secrets...)
	}
	keepFailed()
	if opErr != nil && !st.operationStarted {
		return opErr // did not start (shutting down, or its start could not be recorded)
	}
	rb.At = metav1.Now()
	var down *ShutdownError
	if errors.As(opErr, &down) {
		// Not a failed rollback: the controller cut it short, and the next
		// one runs it again (once: decideRollback).
		rb.Outcome = v1alpha1.OutcomeInterrupted
		return opErr
	}
	if opErr != nil {
		rb.Outcome = v1alpha1.OutcomeFailed
		st.requeueAfter = 0 // held, not retried
		var stall *StallingError
		if errors.As(opErr, &stall) {
			return opErr // the stack is another Stack's (summarize says so)
		}
		msg := scrubMsg(st, fmt.Sprintf("rollback to revision %s, after the up of revision %s failed %d time(s), failed too: %v; the stack may be part-way between the two revisions: push a fix, or request a reconcile to try revision %s again",
			restoredRevision, failed.revision, failed.failures, opErr, failed.revision))
		return &StallingError{Reason: v1alpha1.RollbackFailedReason, Err: errors.New(msg), Revision: st.revision}
	}
	rb.Outcome = v1alpha1.OutcomeSucceeded
	if restored == current {
		// Kept now if they were not (a new data dir): a later rollback to
		// this revision needs them once the inputs change.
		if err := r.writeInputs(ctx, stack.UID, restored); err != nil {
			r.logInputsNotKept(ctx, err)
		}
	}
	stack.Status.Outputs, stack.Status.OutputsOmitted = statusOutputs(res.Outputs, stack.Spec.Outputs)
	st.result = res
	_, _ = r.publishOutputs(ctx, st) // a failure is OutputsPublished's to report
	// Like an up's (hooks.go); the drift check it makes due runs with the
	// restored inputs (driftAtApplied).
	r.driftAfterApplied(ctx, st, res, restoredRevision)
	msg := rolledBackMessage(rb, failed.failures)
	return &StallingError{Reason: v1alpha1.RolledBackReason, Err: errors.New(msg), Revision: st.revision}
}

// rerunningRollback is true when the newest attempt is an interrupted rollback.
func rerunningRollback(stack *v1alpha1.Stack) bool {
	for _, h := range stack.Status.History {
		if h.FinishedAt == nil || h.Type == v1alpha1.OperationDriftCheck || h.Outcome == v1alpha1.OutcomeSkipped {
			continue
		}
		return h.Type == v1alpha1.OperationRollback && cutShort(h)
	}
	return false
}

// cutShort is true for an operation the controller ended, not the program:
// found unfinished after a crash, or cancelled by a shutdown.
func cutShort(h v1alpha1.OperationRecord) bool {
	return h.Outcome == v1alpha1.OutcomeInterrupted ||
		(h.Outcome == v1alpha1.OutcomeCancelled && h.Reason == v1alpha1.InterruptedReason)
}

// attemptedIs is true when the attempted change is the one rb rolls back.
func attemptedIs(stack *v1alpha1.Stack, rb *v1alpha1.RollbackStatus) bool {
	s := stack.Status
	return s.LastAttemptedRevision == rb.FailedRevision &&
		s.LastAttemptedProgramDigest == rb.FailedProgramDigest && s.LastAttemptedInputsDigest == rb.FailedInputsDigest
}

// restoredInputs are the inputs the last applied revision was applied with:
// the ones resolved now when they are the same (only the revision changed),
// else those kept at its up (inputs.Snapshots).
func (r *StackReconciler) restoredInputs(ctx context.Context, st *reconcileState) (*inputs, error) {
	if st.inputs.Digest == st.stack.Status.InputsDigest {
		return st.inputs, nil
	}
	return r.keptInputs(ctx, st.stack.UID, st.stack.Status.InputsDigest)
}

// rollbackInputs are the inputs an operation at the applied revision runs
// with (a rollback, or a drift check while a change is held): the kept ones,
// but not the kept identity. The ServiceAccount is resolved by today's rules
// (spec.serviceAccountName, else the controller's --default-service-account
// now), as for any operation: an identity taken away since the revision was
// applied (a Stack that acted as the controller before an admin set
// --default-service-account) is not handed back by a rollback. A message may
// hold either inputs' secret values (the state holds what the failed up
// wrote): both are scrubbed, during and after.
func rollbackInputs(restored, current *inputs) *inputs {
	run := *restored
	run.ServiceAccount = current.ServiceAccount
	run.Secrets = append(slices.Clone(restored.Secrets), current.Secrets...)
	return &run
}

// rollbackRefused reports a rollback that cannot run: a failed rollback in
// the history and status.rollback, held like any failed one.
func (r *StackReconciler) rollbackRefused(ctx context.Context, st *reconcileState, why string) error {
	stack := st.stack
	rb := stack.Status.Rollback
	now := metav1.Now()
	rb.At, rb.Outcome = now, v1alpha1.OutcomeFailed
	stack.Status.PushHistory(v1alpha1.OperationRecord{
		ID:         newOperationID(runner.OperationType(v1alpha1.OperationRollback)),
		Type:       v1alpha1.OperationRollback,
		Revision:   rb.RestoredRevision,
		StartedAt:  now,
		FinishedAt: &now,
		Outcome:    v1alpha1.OutcomeFailed,
		Reason:     v1alpha1.RollbackFailedReason,
		Message:    truncate(scrubMsg(st, why), 2000),
		Host:       r.Host,
	})
	msg := scrubMsg(st, fmt.Sprintf("the up of revision %s failed; no rollback to revision %s: %s", rb.FailedRevision, rb.RestoredRevision, why))
	return &StallingError{Reason: v1alpha1.RollbackFailedReason, Err: errors.New(msg), Revision: st.revision}
}

// holdRolledBack keeps a rolled-back change from running again
// (ActionRolledBack): Ready stays False (RolledBack or RollbackFailed), the
// Stack is Stalled for this change (a new commit or new inputs are looked for
// at spec.interval, and through the watches), and drift checks go on at the
// applied revision.
func (r *StackReconciler) holdRolledBack(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	rb := stack.Status.Rollback
	if rb.Outcome == v1alpha1.OutcomeRunning {
		rb.Outcome = v1alpha1.OutcomeInterrupted // twice in a row: not run again
	}
	reason, msg := v1alpha1.RolledBackReason, rolledBackMessage(rb, stack.Status.Failures)
	if rb.Outcome != v1alpha1.OutcomeSucceeded {
		reason = v1alpha1.RollbackFailedReason
		msg = fmt.Sprintf("the rollback to revision %s after the up of revision %s failed; revision %s is not tried again until the program or its inputs change, or a reconcile is requested",
			rb.RestoredRevision, rb.FailedRevision, rb.FailedRevision)
	}
	if c := st.currentReady(); c != nil && c.Reason == reason {
		msg = c.Message // the rollback's own account, with its error
	}
	if err := r.driftAtApplied(ctx, st); err != nil {
		return stepDone, err
	}
	return stepDone, &StallingError{Reason: reason, Err: errors.New(msg), Revision: st.revision}
}

// driftAtApplied runs a drift check when one is due, with the inputs the
// applied revision was applied with (the resolved ones are the rolled-back
// change's: with them a check would report the change as drift). Without
// them (not kept) no check runs.
func (r *StackReconciler) driftAtApplied(ctx context.Context, st *reconcileState) error {
	restored, err := r.restoredInputs(ctx, st)
	if err != nil {
		return nil // looked at again at the interval
	}
	current := st.inputs
	st.inputs = rollbackInputs(restored, current)
	defer func() {
		st.inputs = current
		if restored != current {
			current.Secrets = append(current.Secrets, restored.Secrets...)
		}
	}()
	return r.driftIfDue(ctx, st)
}

func rolledBackMessage(rb *v1alpha1.RollbackStatus, failures int64) string {
	return fmt.Sprintf("rolled back to revision %s: the up of revision %s failed %d time(s); revision %s is not tried again until the program or its inputs change, or a reconcile is requested",
		rb.RestoredRevision, rb.FailedRevision, failures, rb.FailedRevision)
}
