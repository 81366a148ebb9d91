package controller

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// finalize runs when a Stack is deleted. With spec.destroyOnDelete the stack is
// destroyed from the cached artifact of the last applied revision, so it works
// even when the repository is gone; a failed destroy keeps the finalizer and is
// retried. Without it, the state stays in the backend and the finalizer goes.
// The outputs Secret and ConfigMap are owned by the Stack and garbage collected.
// When the whole namespace goes, the inputs a destroy needs may go first; then
// the Stack is let go without a destroy, loudly (see inputsGoneWithNamespace).
func (r *StackReconciler) finalize(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	if !controllerutil.ContainsFinalizer(stack, v1alpha1.StackFinalizer) {
		return nil
	}
	if stack.Spec.DestroyOnDelete && stack.Status.LastAppliedArtifact != nil {
		if err := r.destroy(ctx, st); err != nil {
			msg := scrubMsg(st, err.Error())
			if !r.inputsGoneWithNamespace(ctx, stack, err) {
				conditions.MarkFalse(stack, v1alpha1.ReadyCondition, v1alpha1.DestroyFailedReason, "%s", msg)
				return transient(v1alpha1.DestroyFailedReason, err)
			}
			// Nothing can bring the inputs back, and the finalizer would hold
			// the namespace in Terminating for ever: let the Stack go, and say
			// what is left behind (the event may not land in a terminating
			// namespace; the log always does).
			note := fmt.Sprintf("namespace %s is being deleted and took the Stack's inputs with it (%s): stack %s was NOT destroyed; its resources and its state in the backend remain (destroy them with `pulumi destroy`)",
				stack.Namespace, msg, stack.GetStackName())
			log.FromContext(ctx).Info(note)
			r.event(stack, corev1.EventTypeWarning, v1alpha1.DestroyFailedReason, "Finalize", note)
		}
	}
	controllerutil.RemoveFinalizer(stack, v1alpha1.StackFinalizer)
	return st.patcher.Patch(ctx, stack)
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

func (r *StackReconciler) destroy(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	applied := stack.Status.LastAppliedArtifact
	art, err := r.appliedArtifact(ctx, stack)
	if err != nil {
		return fmt.Errorf("destroy: %w", err)
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

// appliedArtifact is the program of the last applied revision: from the cache,
// or, when the cache lost it (a new data volume), fetched again at exactly that
// revision.
func (r *StackReconciler) appliedArtifact(ctx context.Context, stack *v1alpha1.Stack) (artifact.Artifact, error) {
	applied := stack.Status.LastAppliedArtifact
	if art, ok := r.Artifacts.Get(applied.Digest); ok {
		return art, nil
	}
	auth, err := r.gitAuth(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and the Git credentials are unusable: %w", applied.Revision, err)
	}
	fetched, err := r.Source.FetchRevision(ctx, stack, applied.Revision, auth)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is neither cached nor fetchable: %w", applied.Revision, err)
	}
	return fetched, nil
}
