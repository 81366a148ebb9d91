package controller

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// finalize runs when a Stack is deleted. With spec.destroyOnDelete the stack is
// destroyed from the cached artifact of the last applied revision, so it works
// even when the repository is gone; a failed destroy keeps the finalizer and is
// retried. Without it, the state stays in the backend and the finalizer goes.
// The outputs Secret and ConfigMap are owned by the Stack and garbage collected.
func (r *StackReconciler) finalize(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	if !controllerutil.ContainsFinalizer(stack, v1alpha1.StackFinalizer) {
		return nil
	}
	if stack.Spec.DestroyOnDelete && stack.Status.LastAppliedArtifact != nil {
		if err := r.destroy(ctx, st); err != nil {
			conditions.MarkFalse(stack, v1alpha1.ReadyCondition, v1alpha1.DestroyFailedReason, "%s", scrubMsg(st, err.Error()))
			return transient(v1alpha1.DestroyFailedReason, err)
		}
	}
	controllerutil.RemoveFinalizer(stack, v1alpha1.StackFinalizer)
	return st.patcher.Patch(ctx, stack)
}

func (r *StackReconciler) destroy(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	applied := stack.Status.LastAppliedArtifact
	art, ok := r.Artifacts.Get(applied.Digest)
	if !ok {
		// The cache lost it (a new data volume): fetch that exact revision again.
		auth, err := r.gitAuth(ctx, stack)
		if err != nil {
			return fmt.Errorf("destroy: the program of revision %s is not cached and the Git credentials are unusable: %w", applied.Revision, err)
		}
		fetched, err := r.Source.FetchRevision(ctx, stack, applied.Revision, auth)
		if err != nil {
			return fmt.Errorf("destroy: the program of revision %s is neither cached nor fetchable: %w", applied.Revision, err)
		}
		art = fetched
	}
	in, err := r.inputsResolver().resolve(ctx, stack)
	if err != nil {
		return fmt.Errorf("destroy: %w", err)
	}
	st.inputs = in
	if _, err := r.recoverInterrupted(ctx, st); err != nil {
		return err
	}
	if _, err := r.operate(ctx, st, runner.OpDestroy, art, applied.Revision); err != nil {
		return err
	}
	return nil
}
