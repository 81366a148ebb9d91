package controller

import (
	"context"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// inflightOps knows which operations this controller process is running, so that
// a status.currentOperation it does not know can only be a leftover of a process
// that died mid-operation.
type inflightOps struct {
	mu  sync.Mutex
	ops map[types.UID]string
}

func (f *inflightOps) start(uid types.UID, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops == nil {
		f.ops = map[types.UID]string{}
	}
	f.ops[uid] = id
}

func (f *inflightOps) end(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ops, uid)
}

func (f *inflightOps) running(uid types.UID, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[uid] == id
}

// recoverInterrupted finds an operation that a dead controller left unfinished:
// it is recorded in the history as interrupted, and the next operation clears the
// stale lock that run left in the backend.
func (r *StackReconciler) recoverInterrupted(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	op := stack.Status.CurrentOperation
	if op == nil || r.inflight.running(stack.UID, op.ID) {
		return stepContinue, nil
	}
	rec := *op
	now := metav1.NewTime(time.Now())
	rec.FinishedAt = &now
	rec.Outcome = v1alpha1.OutcomeInterrupted
	rec.Reason = v1alpha1.InterruptedReason
	rec.Message = "the controller stopped before the operation finished; its lock is cleared and the operation runs again"
	replaceHistory(stack, rec)
	stack.Status.CurrentOperation = nil
	st.recovered = &rec
	conditions.MarkReconciling(stack, v1alpha1.InterruptedReason, "Recovering from interrupted %s %s", rec.Type, rec.ID)
	r.recordf(stack, corev1.EventTypeWarning, v1alpha1.InterruptedReason, "Recover",
		"%s %s of revision %s was interrupted; running again", rec.Type, rec.ID, rec.Revision)
	return stepContinue, nil
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
