package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

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
