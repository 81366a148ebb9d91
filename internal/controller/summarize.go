package controller

import (
	"context"
	"errors"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// ownedConditions are the conditions this controller sets; on a patch conflict
// its values win over what the API server holds.
var ownedConditions = []string{
	v1alpha1.ReadyCondition, v1alpha1.ReconcilingCondition, v1alpha1.StalledCondition,
	v1alpha1.OutputsPublishedCondition, v1alpha1.DriftedCondition, v1alpha1.PlanPendingCondition,
}

// maxConditionMessage bounds the messages summarize writes: an error can carry
// a long Git or Pulumi message, and the status must stay small.
const maxConditionMessage = 4096

// outcomeKind says how a reconcile ended.
type outcomeKind int

const (
	outcomeOK          outcomeKind = iota // nothing failed
	outcomeSuspended                      // spec.suspend
	outcomeStalled                        // a StallingError: no retry until something changes
	outcomeWaiting                        // a WaitingError: requeued, not a failure
	outcomeFailed                         // anything else: retried with backoff
	outcomeFinalized                      // the finalizer is gone: nothing to patch
	outcomeInterrupted                    // a ShutdownError: the next controller goes on
)

// summary is what summarizeStatus decided; summarize acts on it.
type summary struct {
	kind    outcomeKind
	reason  string // condition reason of a failure
	message string // scrubbed and bounded message of a failure
	result  ctrl.Result
	// atInterval: result.RequeueAfter is spec.interval, the regular poll,
	// which summarize jitters (jitter.go); every other requeue is exact.
	atInterval bool
}

// summarize computes Ready from the outcome of the steps, patches status once,
// and logs each failed reconcile once (the error never reaches controller-runtime,
// which would log it, because typed errors choose the requeue themselves).
func (r *StackReconciler) summarize(ctx context.Context, st *reconcileState, recErr error) (ctrl.Result, error) {
	stack := st.stack
	s := summarizeStatus(stack, recErr, st.requeueAfter, func(m string) string { return scrubMsg(st, m) })
	s.result = jitteredResult(s, r.IntervalJitter)
	if s.kind == outcomeFinalized {
		return ctrl.Result{}, recErr
	}
	logOutcome(ctx, stack, s)
	if s.kind == outcomeStalled {
		r.event(stack, corev1.EventTypeWarning, s.reason, "Stalled", s.message)
	}
	patchCtx, cancel := statusContext(ctx, st)
	defer cancel()
	r.keepOutcome(ctx, st) // the whole outcome, should this patch fail (outcome_store.go)
	if err := st.patcher.Patch(patchCtx, stack,
		patch.WithOwnedConditions{Conditions: ownedConditions},
		patch.WithFieldOwner("stackpilot-controller"),
	); err != nil {
		if !stack.DeletionTimestamp.IsZero() && apierrors.IsNotFound(err) {
			return s.result, nil
		}
		return ctrl.Result{}, err
	}
	r.outcomeLanded(stack.UID)
	r.settleDataDir(ctx, stack)
	recordStackState(stack)
	return s.result, nil
}

// summarizeStatus sets Ready, Reconciling and Stalled, observedGeneration and
// lastHandledReconcileAt from the outcome of the steps (recErr, and the requeue
// a step asked for), and says when to reconcile next. It leaves
// OutputsPublished to the outputs steps. Pure, so that it is table-tested.
func summarizeStatus(stack *v1alpha1.Stack, recErr error, requeueAfter time.Duration, scrub func(string) string) summary {
	if !stack.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(stack, v1alpha1.StackFinalizer) {
		return summary{kind: outcomeFinalized} // the object is going away
	}
	if v, ok := requestedAt(stack); ok {
		stack.Status.LastHandledReconcileAt = v
	}
	msg := func(err error) string { return boundMessage(scrub(err.Error()), maxConditionMessage) }
	typed := outermostTyped(recErr)
	stall, _ := typed.(*StallingError)
	wait, _ := typed.(*WaitingError)
	var down *ShutdownError
	orRetry := func(d time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return stack.GetRetryInterval()
	}
	switch {
	case stack.Spec.Suspend && stack.DeletionTimestamp.IsZero():
		conditions.Delete(stack, v1alpha1.ReconcilingCondition)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		if conditions.Get(stack, v1alpha1.ReadyCondition) == nil || conditions.IsTrue(stack, v1alpha1.ReadyCondition) {
			conditions.MarkTrue(stack, v1alpha1.ReadyCondition, v1alpha1.SuspendedReason, "Reconciliation is suspended")
		}
		stack.Status.ObservedGeneration = stack.Generation
		return summary{kind: outcomeSuspended}
	case recErr == nil:
		conditions.Delete(stack, v1alpha1.ReconcilingCondition)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		stack.Status.ObservedGeneration = stack.Generation
		if requeueAfter > 0 {
			return summary{kind: outcomeOK, result: ctrl.Result{RequeueAfter: requeueAfter}}
		}
		return summary{kind: outcomeOK, result: ctrl.Result{RequeueAfter: stack.GetRequeueAfter()}, atInterval: true}
	case errors.As(recErr, &down):
		// Neither a failure nor a result: Ready is not known until the
		// operation runs again, at once, under the next controller.
		m := msg(down)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		conditions.MarkReconciling(stack, v1alpha1.InterruptedReason, "%s", m)
		conditions.MarkUnknown(stack, v1alpha1.ReadyCondition, v1alpha1.InterruptedReason, "%s", m)
		return summary{kind: outcomeInterrupted, reason: v1alpha1.InterruptedReason, message: m,
			result: ctrl.Result{RequeueAfter: time.Second}}
	case stall != nil:
		m := msg(stall)
		conditions.MarkStalled(stack, stall.Reason, "%s", m)
		conditions.Delete(stack, v1alpha1.ReconcilingCondition)
		conditions.MarkFalse(stack, v1alpha1.ReadyCondition, stall.Reason, "%s", m)
		stack.Status.ObservedGeneration = stack.Generation
		s := summary{kind: outcomeStalled, reason: stall.Reason, message: m}
		if stall.Revision != "" {
			// Stalled for this revision only: look for a new commit at the interval.
			s.result.RequeueAfter = stack.GetRequeueAfter()
			s.atInterval = true
			if requeueAfter > 0 && requeueAfter < s.result.RequeueAfter {
				// Sooner when a step asked (a drift check of the applied
				// revision, held rollback: step_rollback.go).
				s.result.RequeueAfter, s.atInterval = requeueAfter, false
			}
		}
		return s
	case wait != nil:
		m := msg(wait)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		conditions.MarkReconciling(stack, v1alpha1.ProgressingReason, "Waiting: %s", m)
		conditions.MarkFalse(stack, v1alpha1.ReadyCondition, wait.Reason, "%s", m)
		return summary{kind: outcomeWaiting, reason: wait.Reason, message: m,
			result: ctrl.Result{RequeueAfter: orRetry(wait.RequeueAfter)}}
	default:
		m := msg(recErr)
		reason := reasonOf(recErr, v1alpha1.OperationFailedReason)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		conditions.MarkReconciling(stack, meta.ProgressingWithRetryReason, "Retrying: %s", m)
		conditions.MarkFalse(stack, v1alpha1.ReadyCondition, reason, "%s", m)
		// Failures back off through the status (decide), not the workqueue, so a
		// new revision is never held back by an old failure's backoff.
		return summary{kind: outcomeFailed, reason: reason, message: m,
			result: ctrl.Result{RequeueAfter: orRetry(requeueAfter)}}
	}
}

// logOutcome writes one line for a reconcile that did not succeed: an error for
// a failure that is retried, info for a stall or a wait. The message is the
// scrubbed one of the conditions.
func logOutcome(ctx context.Context, stack *v1alpha1.Stack, s summary) {
	l := log.FromContext(ctx).WithValues("stack", stack.Namespace+"/"+stack.Name, "reason", s.reason)
	switch s.kind {
	case outcomeFailed:
		l.Error(errors.New(s.message), "reconcile failed", "retryIn", s.result.RequeueAfter.String())
	case outcomeStalled:
		l.Info("reconcile stalled", "message", s.message, "retryIn", s.result.RequeueAfter.String())
	case outcomeInterrupted:
		l.Info("operation cut short by the shutdown", "message", s.message)
	case outcomeWaiting:
		l.Info("reconcile waiting", "message", s.message, "retryIn", s.result.RequeueAfter.String())
	}
}

// boundMessage cuts s to at most n bytes, on a UTF-8 boundary, marking the cut.
func boundMessage(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n-len("…")) + "…"
}
