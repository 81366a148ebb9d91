package stack

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// maxFinished bounds the finished operations remembered: one per Stack is
// kept, and past this many Stacks the oldest memories go (a forgotten one only
// costs a read of the API server, never a wrong verdict: see recoverInterrupted).
const maxFinished = 10000

// inflightOps knows which operations this controller process is running and
// which it finished, so that a status.currentOperation it does not know can
// only be a leftover of a process that died mid-operation.
type inflightOps struct {
	mu       sync.Mutex
	ops      map[types.UID]string
	finished map[types.UID]finishedOp
}

type finishedOp struct {
	rec v1alpha1.OperationRecord
	at  time.Time
}

func (f *inflightOps) start(uid types.UID, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops == nil {
		f.ops = map[types.UID]string{}
	}
	f.ops[uid] = id
}

// end records that the operation rec ended here, with rec as its final record.
func (f *inflightOps) end(uid types.UID, rec v1alpha1.OperationRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ops, uid)
	if f.finished == nil {
		f.finished = map[types.UID]finishedOp{}
	}
	if _, ok := f.finished[uid]; !ok && len(f.finished) >= maxFinished {
		var oldest types.UID
		for k, v := range f.finished {
			if oldest == "" || v.at.Before(f.finished[oldest].at) {
				oldest = k
			}
		}
		delete(f.finished, oldest)
	}
	f.finished[uid] = finishedOp{rec: rec, at: time.Now()}
}

func (f *inflightOps) running(uid types.UID, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[uid] == id
}

// finishedHere returns the final record of operation id if it ended in this process.
func (f *inflightOps) finishedHere(uid types.UID, id string) (v1alpha1.OperationRecord, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op, ok := f.finished[uid]
	return op.rec, ok && op.rec.ID == id
}

// cacheBehind is true when the last operation this process finished for
// the Stack is neither in its history nor its current operation: the Stack
// was read from a cache that has not seen that operation yet (a loaded API
// server can deliver watch events seconds late). Drift checks are left out:
// a clean one is dropped from the history on purpose.
func (f *inflightOps) cacheBehind(stack *v1alpha1.Stack) bool {
	f.mu.Lock()
	op, ok := f.finished[stack.UID]
	f.mu.Unlock()
	if !ok || op.rec.Type == v1alpha1.OperationDriftCheck {
		return false
	}
	if c := stack.Status.CurrentOperation; c != nil && c.ID == op.rec.ID {
		return false // recoverInterrupted settles it with finishedHere
	}
	for _, h := range stack.Status.History {
		if h.ID == op.rec.ID {
			return false
		}
	}
	return true
}

// forgetSeen drops the last operation this process finished for the Stack
// once the cache holds it in the Stack's history: a cache only moves
// forward, so no later read can be from before it, and a fleet's idle
// Stacks keep no record here (10,000 of them held one each). cached must
// come from the cache, not from the API server: the cache may still be
// behind what the API server says.
func (f *inflightOps) forgetSeen(cached *v1alpha1.Stack) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op, ok := f.finished[cached.UID]
	if !ok {
		return
	}
	for _, h := range cached.Status.History {
		if h.ID == op.rec.ID {
			delete(f.finished, cached.UID)
			return
		}
	}
}

// forget drops what is known of a Stack that is gone.
func (f *inflightOps) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.finished, uid)
}

// recoverInterrupted finds an operation that a dead controller left unfinished:
// it is recorded in the history as interrupted, counted as a failure (so that a
// program that kills its runner backs off instead of looping), and the next
// operation may clear the lock that run left in the backend.
//
// The cached Stack lags behind the API server: the status patch that ended an
// operation may not have reached the cache when the next reconcile starts, and
// that Stack still shows the operation running. So an operation this process is
// not running is confirmed against the API server first, and one that it
// finished is never taken for an interrupted one.
func (r *StackReconciler) recoverInterrupted(ctx context.Context, st *reconcileState) (stepResult, error) {
	if r.inflight.cacheBehind(st.stack) {
		// The cached Stack is from before an operation this process ran and
		// finished: acting on it would decide from an old status, and its
		// status patch would put that old history back over the new one.
		if err := r.refresh(ctx, st); err != nil {
			return stepDone, err
		}
	}
	op := st.stack.Status.CurrentOperation
	if op == nil || r.inflight.running(st.stack.UID, op.ID) {
		return stepContinue, nil
	}
	if err := r.refresh(ctx, st); err != nil {
		return stepDone, err
	}
	stack := st.stack
	op = stack.Status.CurrentOperation
	if op == nil || r.inflight.running(stack.UID, op.ID) {
		return stepContinue, nil // the cache was behind
	}
	if final, ok := r.pendingOutcomeOf(ctx, stack.UID, op.ID); ok {
		// It ended, but the status patch that said so did not land: its
		// whole outcome is put back, not only its record (outcome_store.go).
		stack.Status = final
		log.FromContext(ctx).Info("the final status of an operation had not reached the API server; it was restored from the data dir", "operation", op.ID)
		return stepContinue, nil
	}
	if rec, ok := r.inflight.finishedHere(stack.UID, op.ID); ok {
		// It ended here, but the status patch that said so did not land.
		replaceHistory(stack, rec)
		stack.Status.CurrentOperation = nil
		return stepContinue, nil
	}
	if err := r.awaitOtherShard(stack, op); err != nil {
		// Another shard started it and records its end (shard.go).
		return stepDone, err
	}
	if r.adoptable(ctx, stack, op) {
		// Its Job runs on: followed, not run again (adopt_job.go).
		st.adoptable = op.DeepCopy()
		return stepContinue, nil
	}
	rec := *op
	now := metav1.NewTime(time.Now())
	rec.FinishedAt = &now
	rec.Outcome = v1alpha1.OutcomeInterrupted
	rec.Reason = v1alpha1.InterruptedReason
	rec.Message = "the controller stopped before the operation finished; the operation runs again"
	if rec.Host != "" {
		rec.Message = fmt.Sprintf("the controller on host %s stopped before the operation finished; the operation runs again", rec.Host)
	}
	replaceHistory(stack, rec)
	stack.Status.CurrentOperation = nil
	if rec.Type == v1alpha1.OperationPreview {
		// A preview changes nothing: it is no failed attempt. Its plan was
		// never kept; the next reconcile previews again.
		rec.Plan = ""
		rec.Message = "the controller stopped before the preview finished; it runs again"
		replaceHistory(stack, rec)
		return stepContinue, nil
	}
	if rec.Type == v1alpha1.OperationDriftCheck {
		// A check changes nothing: it is not a failed attempt, and Ready,
		// which is about the last apply, stays. Its slot has passed, so the
		// next check runs at once.
		rec.Message = "the controller stopped before the drift check finished; it runs again"
		replaceHistory(stack, rec)
		return stepContinue, nil
	}
	if rec.Type != v1alpha1.OperationDestroy {
		stack.Status.Failures++
	}
	st.recovered = &rec
	st.found(finding{kind: foundInterrupted,
		progress: fmt.Sprintf("Recovering from interrupted %s %s", rec.Type, rec.ID),
		message: fmt.Sprintf("%s %s of revision %s was interrupted (%d failed attempts in a row)",
			rec.Type, rec.ID, rec.Revision, stack.Status.Failures)})
	r.recordf(stack, corev1.EventTypeWarning, v1alpha1.InterruptedReason, "Recover",
		"%s %s of revision %s was interrupted", rec.Type, rec.ID, rec.Revision)
	return stepContinue, nil
}

// refresh replaces the Stack with what the API server holds now, when the
// cache is behind it.
func (r *StackReconciler) refresh(ctx context.Context, st *reconcileState) error {
	fresh := &v1alpha1.Stack{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(st.stack), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return transient(v1alpha1.OperationFailedReason, fmt.Errorf("confirm the unfinished operation with the API server: %w", err))
	}
	if fresh.ResourceVersion == st.stack.ResourceVersion {
		return nil
	}
	*st.stack = *fresh
	st.patchClient = freshReads{Client: r.Client, reader: r.APIReader}
	st.patcher = patch.NewSerialPatcher(st.stack, st.patchClient)
	return nil
}

// freshReads is the client of the patcher once the Stack was read from the
// API server (refresh): the patch helper reads the latest object to merge
// the conditions into, and the cache, which was found behind, would give an
// older one than the patch's base: its conditions conflict with the base,
// or its resourceVersion fails the helper's optimistic lock, until the cache
// catches up. Writes go to the client as before.
type freshReads struct {
	client.Client
	reader client.Reader
}

func (c freshReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

// replaceHistory updates the history entry with rec's ID, or adds rec.
func replaceHistory(stack *v1alpha1.Stack, rec v1alpha1.OperationRecord) {
	for i := range stack.Status.History {
		if stack.Status.History[i].ID == rec.ID {
			stack.Status.History[i] = rec
			return
		}
	}
	stack.Status.PushHistory(rec)
}
