package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/atomicfile"
)

// An operation's outcome is more than its history record: an up sets the
// applied revision, program, artifact and inputs digest, the failure count,
// the outputs, a rollback status.rollback, and the conditions that say so.
// All of it reaches the API server in the reconcile's final status patch.
// When that patch fails (the API server is away, or the shutdown's
// FinalPatchTimeout ran out), the API server keeps the operation "running"
// with the status of its start: restoring only the record would leave a
// successful up unapplied (it runs again) and a successful rollback failed.
// So the final status is written to <outcomes dir>/<stack uid>.json before
// that patch, and removed once a final patch lands; the next reconcile, in
// this process or the next, finds the operation still running in the API
// server, reads the file and puts the whole outcome back (recoverInterrupted).
// The status holds no secret value (secret outputs are "[secret]"); the file
// is the controller's alone all the same.

// pendingOutcome is the file's content.
type pendingOutcome struct {
	// Operation is the id of the last operation whose start is in the API
	// server: the file is its outcome only while that one shows running.
	Operation string               `json:"operation"`
	Status    v1alpha1.StackStatus `json:"status"`
}

func (r *StackReconciler) outcomeFile(uid types.UID) string {
	return filepath.Join(r.OutcomesDir, string(uid)+".json")
}

// keepOutcome writes the status the final patch is about to write, when an
// operation started in this reconcile. A failure is logged: without the
// file, a failed patch is recovered as today, from the record in memory
// (same process) or as an interruption.
func (r *StackReconciler) keepOutcome(ctx context.Context, st *reconcileState) {
	if r.OutcomesDir == "" || st.lastStarted == "" || st.stack.UID == "" {
		return
	}
	if err := writeOutcome(r.outcomeFile(st.stack.UID), pendingOutcome{Operation: st.lastStarted, Status: st.stack.Status}); err != nil {
		log.FromContext(ctx).Error(err, "keep the operation's outcome until its status patch lands")
	}
}

func writeOutcome(path string, o pendingOutcome) error {
	raw, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, raw, 0o600)
}

// outcomeLanded removes the Stack's pending outcome once a final status
// patch reached the API server: what it held is there now (written by this
// reconcile, or put back by its recovery).
func (r *StackReconciler) outcomeLanded(uid types.UID) {
	if r.OutcomesDir == "" || uid == "" {
		return
	}
	_ = os.Remove(r.outcomeFile(uid))
}

// pendingOutcomeOf reads the kept outcome of operation id; false when there
// is none for that operation (an older one's is removed: it is stale).
func (r *StackReconciler) pendingOutcomeOf(ctx context.Context, uid types.UID, id string) (v1alpha1.StackStatus, bool) {
	if r.OutcomesDir == "" || uid == "" {
		return v1alpha1.StackStatus{}, false
	}
	raw, err := os.ReadFile(r.outcomeFile(uid))
	if errors.Is(err, fs.ErrNotExist) {
		return v1alpha1.StackStatus{}, false
	}
	var o pendingOutcome
	if err == nil {
		err = json.Unmarshal(raw, &o)
	}
	if err != nil {
		log.FromContext(ctx).Error(fmt.Errorf("%s: %w", r.outcomeFile(uid), err), "the kept outcome is unreadable; the operation is recovered as interrupted")
		return v1alpha1.StackStatus{}, false
	}
	if o.Operation != id {
		r.outcomeLanded(uid)
		return v1alpha1.StackStatus{}, false
	}
	return o.Status, true
}
