package stack

import (
	"context"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// progressPatchInterval is how often a running operation's counts so far go
// to status.currentOperation.changes: often enough for `stackpilot reconcile`
// to show them moving, rare enough to cost the API server little.
var progressPatchInterval = 3 * time.Second

// progressPatcher copies the runner's progress file (runner.Spec.ProgressFile)
// into status.currentOperation.changes while the operation runs.
type progressPatcher struct {
	stop chan struct{}
	done chan struct{}
}

// watchProgress starts the patcher of operation id of stack. Call the
// returned stop, which waits for the patcher to end, before the operation's
// final status is written: after it no progress patch can land.
func (r *StackReconciler) watchProgress(ctx context.Context, stack *v1alpha1.Stack, id, path string) (stop func()) {
	p := &progressPatcher{stop: make(chan struct{}), done: make(chan struct{})}
	key := client.ObjectKeyFromObject(stack)
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressPatchInterval)
		defer t.Stop()
		var last *v1alpha1.ChangeSummary
		for {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pr, err := runner.ReadProgress(path)
			if err != nil || pr == nil || pr.ID != id {
				continue
			}
			cs := progressSummary(pr.Changes)
			if last != nil && *last == cs {
				continue // unchanged: no write
			}
			if err := r.patchProgress(ctx, key, id, cs); err != nil {
				// Best effort: the final status carries the real counts.
				log.FromContext(ctx).V(1).Info("live progress not recorded", "operation", id, "error", err.Error())
				continue
			}
			last = &cs
		}
	}()
	return func() {
		close(p.stop)
		<-p.done
	}
}

func progressSummary(c runner.ChangeCounts) v1alpha1.ChangeSummary {
	return v1alpha1.ChangeSummary{Create: int64(c.Create), Update: int64(c.Update), Replace: int64(c.Replace), Delete: int64(c.Delete)}
}

// progressPatch is a JSON patch of the status subresource that sets
// currentOperation.changes only while currentOperation is still operation
// id: the "test" makes a late patch fail rather than revive a finished
// operation (the stop before the final write is the main guard; this one
// holds even against another writer of the Stack).
func progressPatch(id string, cs v1alpha1.ChangeSummary) ([]byte, error) {
	return json.Marshal([]map[string]any{
		{"op": "test", "path": "/status/currentOperation/id", "value": id},
		{"op": "add", "path": "/status/currentOperation/changes", "value": cs},
	})
}

func (r *StackReconciler) patchProgress(ctx context.Context, key client.ObjectKey, id string, cs v1alpha1.ChangeSummary) error {
	body, err := progressPatch(id, cs)
	if err != nil {
		return err
	}
	s := &v1alpha1.Stack{}
	s.Namespace, s.Name = key.Namespace, key.Name
	return r.Status().Patch(ctx, s, client.RawPatch(types.JSONPatchType, body))
}
