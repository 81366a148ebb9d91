package stack

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/executor"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// staleLock asks the runner to clear the lock our previous operation may have
// left (interrupted, or killed at its timeout), described precisely enough for
// the runner to prove that lock dead: the host it ran on and when it started.
// When that host is not this one, it is gone only if no Pod of that name is
// left in the controller's namespace (a controller Pod's host name is its
// name); outside a Pod (no POD_NAMESPACE) nothing can prove it, and the runner
// keeps the lock and says how to clear it by hand.
func (r *StackReconciler) staleLock(ctx context.Context, stack *v1alpha1.Stack) *runner.StaleLock {
	h := staleLockOwner(stack)
	if h == nil || h.Host == "" {
		return nil // no dead operation, or one recorded before hosts were
	}
	req := &runner.StaleLock{Host: h.Host, NotBefore: staleLockSince(stack, h).Time}
	if h.Host == executor.JobName(stack.Name, h.ID) {
		// A Job operation: its Pod's host name is its Job's name, and the
		// Pod is provably dead once no Pod of the operation is left.
		req.HostGone = r.operationPodsGone(ctx, stack, h.ID)
		return req
	}
	if h.Host != r.Host && r.PodNamespace != "" {
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.PodNamespace, Name: h.Host}, &corev1.Pod{})
		req.HostGone = apierrors.IsNotFound(err)
		if err != nil && !req.HostGone {
			log.FromContext(ctx).Info("cannot tell whether the interrupted operation's Pod is gone; its lock stays", "pod", h.Host, "error", err.Error())
		}
	}
	return req
}

// operationPodsGone is true when no Pod of operation id (they carry its
// label, executor.LabelOperation) may still run a process in the Stack's
// namespace: none is left, or those left have ended (phase Succeeded or
// Failed: every container terminated, and a runner Pod never restarts one).
func (r *StackReconciler) operationPodsGone(ctx context.Context, stack *v1alpha1.Stack, id string) bool {
	var pods corev1.PodList
	err := r.APIReader.List(ctx, &pods, client.InNamespace(stack.Namespace), client.MatchingLabels{executor.LabelOperation: id})
	if err != nil {
		log.FromContext(ctx).Info("cannot tell whether the interrupted operation's Pod is gone; its lock stays", "operation", id, "error", err.Error())
		return false
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return false
		}
	}
	return true
}
