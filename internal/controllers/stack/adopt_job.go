package stack

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/executor"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// Adoption: a Job operation is not a process of the controller. When the
// controller stops while one runs, the Job runs on (executor.ErrDetached)
// and status.currentOperation still names it; the next controller finds
// the Job (recoverInterrupted) and, rather than recording an interrupted
// operation and running it again, adopts it: when the route comes to the
// same operation (the same type at the same revision, which is what decide
// picks while nothing else changed) it follows that Job instead of starting
// one, so what an up hands on (outputs, kept inputs, drift) happens as
// usual, and the history holds one record. When the route goes elsewhere
// (the Stack was suspended, its source moved on), the Job's end is awaited
// and recorded at the end of the reconcile (awaitAdoptable), and the next
// reconcile decides again.
//
// Previews and drift checks change nothing: they are cut short on shutdown
// like Local ones (JobRequest.CancelOnStop), and a crash's leftover Job of
// one is deleted and the operation run again.

// adoptable reports whether op, which no controller process runs, is a Job
// of this Stack's that still runs and may be adopted.
func (r *StackReconciler) adoptable(ctx context.Context, stack *v1alpha1.Stack, op *v1alpha1.OperationRecord) bool {
	if r.JobExecutor == nil || r.executorOf(stack) != v1alpha1.ExecutorJob {
		return false
	}
	job, err := r.JobExecutor.Find(ctx, stack, op.ID)
	if err != nil {
		if !errors.Is(err, executor.ErrNoJob) {
			log.FromContext(ctx).Info("cannot tell whether the unfinished operation's Job runs; it is taken for interrupted", "operation", op.ID, "error", err.Error())
		}
		return false
	}
	if !adoptableType(op.Type) {
		// Cut short; it runs again. Its Job must not run beside the next.
		r.JobExecutor.Remove(job)
		return false
	}
	return true
}

// adoptableType: the operations that change the stack are adopted; the
// others are run again, which costs nothing but time.
func adoptableType(t v1alpha1.OperationType) bool {
	return t != v1alpha1.OperationPreview && t != v1alpha1.OperationDriftCheck
}

// takeAdoptable returns the operation to adopt when it is the one the route
// is about to start (same type, same revision), and forgets it.
func (st *reconcileState) takeAdoptable(t v1alpha1.OperationType, revision string) *v1alpha1.OperationRecord {
	a := st.adoptable
	if a == nil || a.Type != t || a.Revision != revision {
		return nil
	}
	st.adoptable = nil
	return a
}

// awaitAdoptable follows a Job left to adopt that the route did not come
// to, and records its end, so that no operation of this Stack starts beside
// it and its outcome is in the history. The next reconcile decides afresh.
func (r *StackReconciler) awaitAdoptable(ctx context.Context, st *reconcileState) {
	a := st.adoptable
	if a == nil {
		return
	}
	st.adoptable = nil
	stack := st.stack
	job, err := r.JobExecutor.Find(ctx, stack, a.ID)
	if err != nil {
		return // gone since: the next reconcile records it interrupted
	}
	st.operationStarted = true
	r.inflight.start(stack.UID, a.ID)
	rec := *a
	defer func() { r.inflight.end(stack.UID, rec) }()
	req := executor.JobRequest{
		Spec: runner.Spec{APIVersion: runner.APIVersion, ID: a.ID, Type: runner.OperationType(a.Type),
			Timeout: runner.Duration(stack.GetTimeout())},
		Stack:          stack,
		ServiceAccount: job.Spec.Template.Spec.ServiceAccountName,
		Digest:         job.Annotations[executor.AnnotationDigest],
		TreeDir:        "-", // the Pod fetched its program before this controller started
	}
	if art, ok := r.Artifacts.Get(req.Digest); ok {
		req.TreeDir = art.Path
	}
	res, err := r.JobExecutor.Adopt(ctx, req)
	switch {
	case errors.Is(err, executor.ErrDetached):
		return // stopping again: the next controller adopts it
	case err != nil:
		res = runner.Result{APIVersion: runner.APIVersion, ID: a.ID, Type: req.Spec.Type,
			Outcome: runner.Outcome(v1alpha1.OutcomeInterrupted), ErrorClass: runner.ErrorInternal,
			Message: err.Error(), FinishedAt: time.Now()}
	}
	finishRecord(ctx, st, &rec, &res)
	if res.Outcome != runner.OutcomeSucceeded && rec.Type != v1alpha1.OperationDestroy {
		stack.Status.Failures++
	}
	r.recordf(stack, corev1.EventTypeNormal, "OperationAdopted", string(rec.Type),
		"%s %s of revision %s, left running by a stopped controller, ended %s", rec.Type, rec.ID, rec.Revision, res.Outcome)
	st.requeueAfter = time.Second
	log.FromContext(ctx).Info(fmt.Sprintf("adopted %s %s ended %s; deciding again", rec.Type, rec.ID, res.Outcome))
}
