package stack

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fluxcd/pkg/runtime/conditions"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// finalize runs when a Stack is deleted. With spec.destroyOnDelete the stack is
// destroyed from the cached program of the last applied revision (or, when no
// up ever succeeded, of the last attempted one: a first up that failed part-way
// may have created resources), so it works even when the repository is gone; a
// failed destroy keeps the finalizer and is retried. Without it, the state stays
// in the backend and the finalizer goes. The outputs Secret and ConfigMap are
// owned by the Stack and garbage collected. When the whole namespace goes, the
// inputs a destroy needs may go first; then the Stack is let go without a
// destroy, loudly (see inputsGoneWithNamespace).
func (r *StackReconciler) finalize(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	if !controllerutil.ContainsFinalizer(stack, v1alpha1.StackFinalizer) {
		return nil
	}
	if op := stack.Status.CurrentOperation; op != nil && !r.inflight.running(stack.UID, op.ID) && r.adoptable(ctx, stack, op) {
		// A stopped controller's Job still runs: a destroy beside it
		// would find the stack locked.
		st.adoptable = op.DeepCopy()
		r.awaitAdoptable(ctx, st)
	}
	plan := planFinalize(finalizeInputOf(stack))
	if plan.Destroy != nil {
		if wait := destroyRetryWait(stack, time.Now()); wait > 0 {
			// The Ready message is the failed destroy's own account.
			msg := ""
			if c := st.currentReady(); c != nil {
				msg = c.Message
			}
			return &WaitingError{Reason: v1alpha1.DestroyFailedReason, Err: errors.New(msg), RequeueAfter: wait}
		}
		if err := r.destroy(ctx, st, *plan.Destroy); err != nil {
			var down *ShutdownError
			if errors.As(err, &down) {
				return err // the next controller destroys it
			}
			next := afterDestroyFailure(reasonOf(err, ""), r.inputsGoneWithNamespace(ctx, stack, err))
			if next == retryDestroy {
				// Backed off like any failure: a destroy a protected
				// resource refuses would otherwise run at every retryInterval.
				failures := failedDestroys(stack)
				st.requeueAfter = backoff(max(failures, 1), stack.GetRetryInterval(), stack.GetRequeueAfter())
				err = fmt.Errorf("%w (%d failed destroy(s) in a row; retried in %s, or at once on a reconcile request or a spec change)",
					err, failures, st.requeueAfter)
				// Ready says so with this message (summarize).
				return transient(v1alpha1.DestroyFailedReason, err)
			}
			r.letGo(ctx, stack, next, scrubMsg(st, err.Error()))
		}
	} else if plan.Note != "" {
		log.FromContext(ctx).V(1).Info("finalizing without destroy", "why", plan.Note)
	}
	controllerutil.RemoveFinalizer(stack, v1alpha1.StackFinalizer)
	r.inflight.forget(stack.UID)
	r.forgetInputs(ctx, stack.UID)
	r.outcomeLanded(stack.UID)
	if r.Plans != nil {
		_ = r.Plans.RemoveStack(stack.UID) // its plans can never be applied now
		if r.Reviews != nil {
			_ = r.Reviews.RemoveStack(stack.UID)
		}
	}
	if r.Logs != nil {
		_ = r.Logs.RemoveStack(string(stack.UID)) // logs live as long as their Stack
	}
	forgetStackMetrics(stack.Namespace, stack.Name)
	return st.patcher.Patch(ctx, stack)
}

// letGo says, in the log and an event, why a Stack goes without its destroy
// (the event may not land in a terminating namespace; the log always does).
func (r *StackReconciler) letGo(ctx context.Context, stack *v1alpha1.Stack, next afterFailure, msg string) {
	var note string
	switch next {
	case releaseNamespaceGone:
		// Nothing can bring the inputs back, and the finalizer would hold the
		// namespace in Terminating for ever.
		note = fmt.Sprintf("namespace %s is being deleted and took the Stack's inputs with it (%s): stack %s was NOT destroyed; its resources and its state in the backend remain (destroy them with `pulumi destroy`)",
			stack.Namespace, msg, stack.GetStackName())
	case releaseClaimed:
		// The stack is another Stack's: it is not ours to destroy.
		note = fmt.Sprintf("stack %s was NOT destroyed: it belongs to another Stack (%s)", stack.GetStackName(), msg)
	}
	log.FromContext(ctx).Info(note)
	r.event(stack, corev1.EventTypeWarning, v1alpha1.DestroyFailedReason, "Finalize", note)
}

// finalizeInput is what planFinalize looks at, plain so that it is table-tested.
type finalizeInput struct {
	DestroyOnDelete bool
	Applied         *v1alpha1.ArtifactReference // last successful up
	Attempted       *v1alpha1.ArtifactReference // last up started
	// Claimed: the newest up found the stack claimed by another Stack, and no
	// up of this Stack ever succeeded: nothing in that stack is ours.
	Claimed bool
}

// finalizePlan is planFinalize's answer: destroy with this program, or not (Note says why).
type finalizePlan struct {
	Destroy *v1alpha1.ArtifactReference
	Note    string
}

// planFinalize decides whether deleting a Stack destroys its stack: whenever
// the stack may hold resources of this Stack. An applied program is the
// best description of them; an attempted one is all there is after a first up
// that failed part-way. A stack never attempted was never created.
func planFinalize(in finalizeInput) finalizePlan {
	switch {
	case !in.DestroyOnDelete:
		return finalizePlan{Note: "spec.destroyOnDelete is false: the resources and the state stay"}
	case in.Applied != nil:
		return finalizePlan{Destroy: in.Applied}
	case in.Claimed:
		return finalizePlan{Note: "the stack belongs to another Stack: nothing of this one is in it"}
	case in.Attempted != nil:
		return finalizePlan{Destroy: in.Attempted}
	}
	return finalizePlan{Note: "no up was ever started: there is no stack to destroy"}
}

func finalizeInputOf(stack *v1alpha1.Stack) finalizeInput {
	in := finalizeInput{
		DestroyOnDelete: stack.Spec.DestroyOnDelete,
		Applied:         stack.Status.LastAppliedArtifact,
		Attempted:       stack.Status.LastAttemptedArtifact,
	}
	for _, h := range stack.Status.History {
		if h.Type == v1alpha1.OperationUp && h.FinishedAt != nil {
			in.Claimed = h.Reason == v1alpha1.StackClaimedReason
			break
		}
	}
	return in
}

// afterFailure is what a failed destroy leads to.
type afterFailure int

const (
	retryDestroy         afterFailure = iota // keep the finalizer, retry with backoff
	releaseNamespaceGone                     // the namespace took the inputs: let the Stack go
	releaseClaimed                           // the stack is another Stack's: let the Stack go
)

// afterDestroyFailure decides between retrying a failed destroy and letting
// the Stack go without it.
func afterDestroyFailure(reason string, inputsGoneWithNamespace bool) afterFailure {
	switch {
	case reason == v1alpha1.StackClaimedReason:
		return releaseClaimed
	case inputsGoneWithNamespace:
		return releaseNamespaceGone
	}
	return retryDestroy
}

// inputsGoneWithNamespace is true when destroy failed because a Secret,
// ConfigMap or ServiceAccount it needs is missing and the Stack's namespace is
// being deleted:
// the namespace controller deletes everything in it at once, so the passphrase
// Secret is often gone before the Stack's finalizer runs.
func (r *StackReconciler) inputsGoneWithNamespace(ctx context.Context, stack *v1alpha1.Stack, err error) bool {
	switch reasonOf(err, "") {
	case v1alpha1.InputsNotFoundReason, v1alpha1.ServiceAccountNotFoundReason: // the Stack's ServiceAccount goes with the namespace too
	default:
		return false
	}
	ns := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: stack.Namespace}, ns); err != nil {
		return apierrors.IsNotFound(err)
	}
	return ns.DeletionTimestamp != nil
}

func (r *StackReconciler) destroy(ctx context.Context, st *reconcileState, ref v1alpha1.ArtifactReference) error {
	stack := st.stack
	in, err := r.inputsResolver().resolve(ctx, stack)
	if err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	st.inputs = in
	if err := stackChanged(stack, in); err != nil {
		// Destroying the stack the spec names now would miss the one applied.
		return transient(v1alpha1.DestroyFailedReason, fmt.Errorf("destroy: %w", err))
	}
	art, err := r.programAt(ctx, stack, ref)
	if err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	if _, err := r.recoverInterrupted(ctx, st); err != nil {
		return err
	}
	if _, err := r.operate(ctx, st, runner.OpDestroy, art, ref.Revision); err != nil {
		return err
	}
	return nil
}

// failedDestroys counts the destroys that failed in a row, newest first,
// in the history (a deleted Stack runs nothing else).
func failedDestroys(stack *v1alpha1.Stack) int64 {
	var n int64
	for _, h := range stack.Status.History {
		if h.FinishedAt == nil {
			continue
		}
		if h.Type != v1alpha1.OperationDestroy || h.Outcome == v1alpha1.OutcomeSucceeded {
			break
		}
		n++
	}
	return n
}

// destroyRetryWait is how long the destroy of a deleted Stack still waits
// after its last failure: spec.retryInterval, doubled per failure in a row
// after the first, capped at spec.interval (backoff). A reconcile request,
// or a spec change since the failure (say destroyOnDelete turned off), ends
// the wait at once.
func destroyRetryWait(stack *v1alpha1.Stack, now time.Time) time.Duration {
	failures := failedDestroys(stack)
	if failures == 0 || isRequested(stack) {
		return 0
	}
	ready := conditions.Get(stack, v1alpha1.ReadyCondition)
	if ready == nil || ready.Reason != v1alpha1.DestroyFailedReason || ready.ObservedGeneration != stack.Generation {
		return 0
	}
	last := stack.Status.History[0]
	for _, h := range stack.Status.History {
		if h.FinishedAt != nil {
			last = h
			break
		}
	}
	due := last.FinishedAt.Add(backoff(failures, stack.GetRetryInterval(), stack.GetRequeueAfter()))
	return max(due.Sub(now), 0)
}

// appliedArtifact is the program of the last applied revision (see programAt).
func (r *StackReconciler) appliedArtifact(ctx context.Context, stack *v1alpha1.Stack) (artifact.Artifact, error) {
	return r.programAt(ctx, stack, *stack.Status.LastAppliedArtifact)
}
