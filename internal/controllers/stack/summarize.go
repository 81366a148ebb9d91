package stack

import (
	"context"
	"errors"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// summarize turns what the steps found and the reconcile's error into
// Ready, Reconciling and Stalled, patches status once, and logs each failed
// reconcile once (the error never reaches controller-runtime, which would log
// it, because typed errors choose the requeue themselves).
func (r *StackReconciler) summarize(ctx context.Context, st *reconcileState, recErr error) (ctrl.Result, error) {
	stack := st.stack
	st.writeFindings()
	s := summarizeStatus(stack, recErr, st.requeueAfter, func(m string) string { return scrubMsg(st, m) })
	s.result = jitteredResult(s, r.IntervalJitter)
	if s.kind == outcomeFinalized {
		return ctrl.Result{}, recErr
	}
	if errors.Is(recErr, errReleased) && !st.operationStarted {
		// Another shard serves the Stack now: nothing of this reconcile is
		// written (shard.go).
		return ctrl.Result{}, nil
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
// a step asked for), and says when to reconcile next. Without an error, Ready
// stays what the steps found (writeFindings, before it). It leaves
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

// A finding is what a step found out about the Stack's readiness. Steps
// record findings (found) and never set Ready, Reconciling or Stalled
// themselves: this file alone turns findings and errors into those
// conditions, when a status patch goes out during the reconcile (patchStart)
// and at its end (summarize). Findings are written in the order they were
// found, each with the time it was found, so the conditions are the same as
// if each step had set them when it found them; what reads Ready during the
// reconcile reads it through readyOf.
type finding struct {
	kind findingKind
	// message is Ready's; progress is Reconciling's, for the kinds that
	// set it (foundRunning, foundInterrupted).
	message, progress string
	at                time.Time
}

type findingKind int

const (
	// foundApplied: the revision resolved now is applied (an up or a
	// remediate succeeded, a skip, or nothing to do). Ready True.
	foundApplied findingKind = iota + 1
	// foundPreviewOnly: the plan of a PreviewOnly Stack is made, all it is
	// asked to do. Ready True, so that tools that wait for Ready (kstatus, a
	// Kustomization's wait) do not wait for ever.
	foundPreviewOnly
	// foundAwaitingApproval: a plan waits for a person. Ready False.
	foundAwaitingApproval
	// foundInterrupted: an operation a dead controller left unfinished was
	// recovered (counted as a failure). Ready False, Reconciling.
	foundInterrupted
	// foundRunning: an operation starts. Ready Unknown, Reconciling.
	foundRunning
)

// found records f, found now.
func (st *reconcileState) found(f finding) {
	f.at = time.Now()
	st.findings = append(st.findings, f)
}

// readyOf is the Ready condition a finding stands for.
func readyOf(f finding) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ReadyCondition, Message: f.message}
	switch f.kind {
	case foundApplied:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.SucceededReason
	case foundPreviewOnly:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.PreviewOnlyReason
	case foundAwaitingApproval:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.AwaitingApprovalReason
	case foundInterrupted:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.InterruptedReason
	case foundRunning:
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ProgressingReason
	}
	return c
}

// reconcilingOf is the Reconciling condition a finding stands for, if any.
func reconcilingOf(f finding) (metav1.Condition, bool) {
	c := metav1.Condition{Type: v1alpha1.ReconcilingCondition, Status: metav1.ConditionTrue, Message: f.progress}
	switch f.kind {
	case foundInterrupted:
		c.Reason = v1alpha1.InterruptedReason
	case foundRunning:
		c.Reason = v1alpha1.ProgressingReason
	default:
		return metav1.Condition{}, false
	}
	return c, true
}

// currentReady is Ready as the steps of this reconcile left it so far: the
// newest finding not yet written, else the Stack's condition (nil if none).
func (st *reconcileState) currentReady() *metav1.Condition {
	if n := len(st.findings); n > 0 {
		c := readyOf(st.findings[n-1])
		return &c
	}
	return conditions.Get(st.stack, v1alpha1.ReadyCondition)
}

// writeFindings writes the findings not yet written into the Stack's
// conditions, in the order they were found.
func (st *reconcileState) writeFindings() {
	for _, f := range st.findings {
		if c, ok := reconcilingOf(f); ok {
			conditions.Delete(st.stack, v1alpha1.StalledCondition) // as conditions.MarkReconciling does
			setAt(st.stack, c, f.at)
		}
		setAt(st.stack, readyOf(f), f.at)
	}
	st.findings = nil
}

// setAt sets c as conditions.Set does, with at, when it was found, as its
// transition time when it is one.
func setAt(stack *v1alpha1.Stack, c metav1.Condition, at time.Time) {
	prev := conditions.Get(stack, c.Type)
	conditions.Set(stack, &c)
	if prev != nil && prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message {
		return // no transition: its time stays
	}
	for i := range stack.Status.Conditions {
		if stack.Status.Conditions[i].Type == c.Type {
			stack.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at.UTC().Truncate(time.Second))
		}
	}
}

// patchStart writes the start of an operation to the API server before the
// operation runs, so that a crash leaves a trace, with the findings so far.
// start, when set, is what Ready and Reconciling say while it runs; a drift
// check passes none: it applies nothing, and Ready is about the last apply.
// The conditions are ours: they win over what the API server holds (its
// Ready may be newer than the patch's base, see freshReads, or an up may
// have just found it in this reconcile).
func (st *reconcileState) patchStart(ctx context.Context, start *finding) error {
	if start != nil {
		st.found(*start)
	}
	st.writeFindings()
	return st.patcher.Patch(ctx, st.stack, patch.WithOwnedConditions{Conditions: ownedConditions})
}
