package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
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
	r := &StackReconciler{Executor: exec}
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
