package stack

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/notify"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// countingExecutor counts the operations it was asked to run.
type countingExecutor struct{ runs int }

func (e *countingExecutor) Run(context.Context, runner.Spec) (runner.Result, error) {
	e.runs++
	return runner.Result{Outcome: runner.OutcomeSucceeded}, nil
}

// TestNoOperationStartsWhileShuttingDown: once the reconcile's context has
// ended, operate records nothing (no status change, no patch: the patcher is
// nil here and would panic) and runs nothing.
func TestNoOperationStartsWhileShuttingDown(t *testing.T) {
	g := NewWithT(t)
	exec := &countingExecutor{}
	r := &StackReconciler{Config: Config{Executor: exec}}
	st := &reconcileState{stack: &v1alpha1.Stack{}, inputs: &inputs{}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := r.operate(ctx, st, runner.OpUp, artifact.Artifact{}, "main@sha1:abc")
	g.Expect(err).To(MatchError(ErrShuttingDown))
	g.Expect(res).To(BeNil())
	g.Expect(exec.runs).To(BeZero())
	g.Expect(st.stack.Status.CurrentOperation).To(BeNil())
	g.Expect(st.stack.Status.History).To(BeEmpty())
	g.Expect(st.operationStarted).To(BeFalse())
}

// TestStatusContext: the final patch of a reconcile whose operation started
// outlives the reconcile's context; without an operation it does not.
func TestStatusContext(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	patchCtx, done := statusContext(ctx, &reconcileState{operationStarted: true})
	g.Expect(patchCtx.Err()).NotTo(HaveOccurred(), "the end of a started operation must land")
	deadline, ok := patchCtx.Deadline()
	g.Expect(ok).To(BeTrue(), "bounded")
	g.Expect(deadline).To(BeTemporally("~", time.Now().Add(FinalPatchTimeout), FinalPatchTimeout/2))
	done()
	g.Expect(patchCtx.Err()).To(HaveOccurred())

	patchCtx, done = statusContext(ctx, &reconcileState{})
	defer done()
	g.Expect(patchCtx.Err()).To(HaveOccurred(), "a stopping controller records nothing else")
}

// TestStatusContextWhileRunning: while the controller runs on, the final
// patch after an operation has no deadline of its own (a slow API server is
// waited for); once the reconcile's context ends, the patch gets its bound
// from then on.
func TestStatusContextWhileRunning(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	patchCtx, done := statusContext(ctx, &reconcileState{operationStarted: true})
	defer done()
	_, bounded := patchCtx.Deadline()
	g.Expect(bounded).To(BeFalse(), "no deadline while the controller runs on")
	g.Consistently(patchCtx.Done(), 100*time.Millisecond).ShouldNot(BeClosed())

	const bound = 200 * time.Millisecond
	live, stopLive := boundedAfterStop(ctx, bound)
	defer stopLive()
	g.Consistently(live.Done(), 2*bound).ShouldNot(BeClosed(), "not bounded before the reconcile's context ends")
	stopped := time.Now()
	cancel()
	g.Expect(patchCtx.Err()).NotTo(HaveOccurred(), "the end of a started operation must still land")
	g.Eventually(live.Done(), 10*time.Second).Should(BeClosed(), "bounded once the reconcile's context ended")
	g.Expect(time.Since(stopped)).To(BeNumerically(">=", bound), "the whole bound, counted from the stop")

	released, release := boundedAfterStop(context.Background(), time.Hour)
	release()
	g.Expect(released.Err()).To(HaveOccurred(), "its cancel func ends it")
}

// TestCancelledByShutdownRunsAgainAtOnce: an up that Pulumi stopped because the
// controller was stopping counts as an interruption, not as the program's
// failure: the next controller runs it again at once instead of waiting out
// the retry interval; a cancel while the controller runs on is not one.
func TestCancelledByShutdownRunsAgainAtOnce(t *testing.T) {
	g := NewWithT(t)
	stopped, stop := context.WithCancel(context.Background())
	stop()
	cancelled := &runner.Result{Outcome: runner.OutcomeCancelled}
	g.Expect(cancelledByShutdown(stopped, cancelled)).To(BeTrue())
	g.Expect(cancelledByShutdown(context.Background(), cancelled)).To(BeFalse(), "the controller runs on")
	g.Expect(cancelledByShutdown(stopped, &runner.Result{Outcome: runner.OutcomeFailed})).To(BeFalse())

	now := time.Now()
	finished := func(outcome v1alpha1.OperationOutcome, reason string) v1alpha1.OperationRecord {
		at := metav1.NewTime(now)
		return v1alpha1.OperationRecord{ID: string(outcome), Outcome: outcome, Reason: reason, FinishedAt: &at}
	}
	stack := &v1alpha1.Stack{}
	stack.Status.History = []v1alpha1.OperationRecord{
		{ID: "starting", Outcome: v1alpha1.OutcomeRunning},
		finished(v1alpha1.OperationOutcome(runner.OutcomeCancelled), v1alpha1.InterruptedReason),
		finished(v1alpha1.OutcomeSucceeded, ""),
	}
	g.Expect(lastInterrupted(stack)).To(BeTrue())
	stack.Status.History[1] = finished(v1alpha1.OutcomeFailed, v1alpha1.ProgramErrorReason)
	g.Expect(lastInterrupted(stack)).To(BeFalse())

	in := decideInput{Revision: "r2", ProgramDigest: "p2", InputsDigest: "d", LastAppliedRevision: "r1", LastAppliedProgramDigest: "p1",
		LastAppliedInputsDigest: "d", LastAttemptedProgramDigest: "p2", LastAttemptedInputsDigest: "d", Failures: 1, LastAttemptFinished: now,
		Interrupted: true, Now: now, RetryInterval: time.Hour, Interval: time.Hour}
	g.Expect(decide(in).Action).To(Equal(ActionUp))
}

// TestStepsAfterAnUpEndedByShutdown (issue 21, item 20): the up ends while
// the controller stops (its reconcile's context is gone). The steps after it
// (publishing its outputs) run on a live context, bounded by
// FinalPatchTimeout, on which no other operation starts; a step that would
// start one ends the reconcile without an error.
func TestStepsAfterAnUpEndedByShutdown(t *testing.T) {
	g := NewWithT(t)
	r := &StackReconciler{}
	st := &reconcileState{stack: &v1alpha1.Stack{}}
	defer st.endDrain()
	ctx, stop := context.WithCancel(context.Background())
	var publishErr, driftErr error
	var publishDeadline time.Time
	ran := 0
	err := r.runSteps(ctx, st, []stepFunc{
		func(ctx context.Context, st *reconcileState) (stepResult, error) {
			st.operationStarted = true // the up ran...
			stop()                     // ...and SIGTERM came while it did
			return stepContinue, nil
		},
		func(ctx context.Context, st *reconcileState) (stepResult, error) { // publishOutputs
			ran++
			publishErr = ctx.Err()
			publishDeadline, _ = ctx.Deadline()
			return stepContinue, nil
		},
		func(ctx context.Context, st *reconcileState) (stepResult, error) { // checkDriftAfterUp
			ran++
			driftErr = startAllowed(ctx)
			return stepDone, fmt.Errorf("drift check: %w", driftErr)
		},
	})
	g.Expect(ran).To(Equal(2))
	g.Expect(publishErr).NotTo(HaveOccurred(), "the outputs are published on a live context")
	g.Expect(publishDeadline).To(BeTemporally("~", time.Now().Add(FinalPatchTimeout), FinalPatchTimeout/2), "bounded")
	g.Expect(driftErr).To(MatchError(ErrShuttingDown), "no other operation starts")
	g.Expect(err).NotTo(HaveOccurred(), "not starting it is no failure")

	// Without an operation, a stopping reconcile keeps its ended context.
	st = &reconcileState{stack: &v1alpha1.Stack{}}
	g.Expect(st.stepContext(ctx).Err()).To(HaveOccurred())
}

// TestShutdownCancelIsNoFailure (issue 21, item 19): an up cut short by the
// shutdown leaves Ready Unknown with reason Interrupted, not False with the
// error class's reason: no Alert takes it for a failure, so the apply after
// the restart is no "recovery".
func TestShutdownCancelIsNoFailure(t *testing.T) {
	g := NewWithT(t)
	stack := &v1alpha1.Stack{}
	stack.Generation = 2
	conditions.MarkTrue(stack, v1alpha1.ReadyCondition, v1alpha1.SucceededReason, "Applied revision main@sha1:a")
	err := &ShutdownError{Err: errors.New("up u-1 of revision main@sha1:b was cut short by the controller's shutdown")}
	s := summarizeStatus(stack, transient(v1alpha1.OperationFailedReason, err), time.Hour, func(m string) string { return m })
	g.Expect(s.kind).To(Equal(outcomeInterrupted))
	ready := conditions.Get(stack, v1alpha1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionUnknown))
	g.Expect(ready.Reason).To(Equal(v1alpha1.InterruptedReason))
	g.Expect(ready.Message).To(ContainSubstring("cut short by the controller's shutdown"))
	g.Expect(conditions.IsReconciling(stack)).To(BeTrue())
	g.Expect(notify.Seed(stack).Failed).To(BeFalse(), "the next controller's Alerts do not start from a failure")

	stopped, stop := context.WithCancel(context.Background())
	stop()
	rec := &v1alpha1.OperationRecord{Reason: v1alpha1.InterruptedReason}
	g.Expect(endedByShutdown(stopped, rec)).To(BeTrue())
	g.Expect(endedByShutdown(context.Background(), rec)).To(BeFalse(), "a kill while the controller runs on is an interruption")
	g.Expect(endedByShutdown(stopped, &v1alpha1.OperationRecord{Reason: v1alpha1.ProgramErrorReason})).To(BeFalse())
}
