package stack

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// name), or that Pod's containers all restarted since (podRestartedSince);
// outside a Pod (no POD_NAMESPACE) nothing can prove it, and the runner
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
		pod := &corev1.Pod{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.PodNamespace, Name: h.Host}, pod)
		req.HostGone = apierrors.IsNotFound(err) || (err == nil && podRestartedSince(pod, req.NotBefore))
		if err != nil && !req.HostGone {
			log.FromContext(ctx).Info("cannot tell whether the interrupted operation's Pod is gone; its lock stays", "pod", h.Host, "error", err.Error())
		}
	}
	return req
}

// containerClockSlack absorbs the whole seconds of the times compared in
// podRestartedSince: a container is taken as restarted only when it started
// clearly after the operation.
const containerClockSlack = 2 * time.Second

// podRestartedSince is true when no process of pod can be one that ran
// before t (when the interrupted operation started): the Pod ended, it is
// another Pod of the same name (created after t), or every one of its
// containers ended or runs as an instance started after t. That last case is
// a controller killed (SIGKILL, OOM, a failed liveness probe) and restarted
// by the kubelet while its Pod stays: a container's processes all die with
// it, the Local runner and its pulumi CLI included, so in a two-replica
// install the new leader may clear the lock the old one left. A container
// that never restarted (a sidecar, or the same controller still running)
// keeps the lock: nothing proves its processes dead.
func podRestartedSince(pod *corev1.Pod, t time.Time) bool {
	after := func(x metav1.Time) bool { return x.Time.After(t.Add(containerClockSlack)) }
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return true
	case after(pod.CreationTimestamp):
		return true
	case len(pod.Status.ContainerStatuses) == 0 || len(pod.Status.ContainerStatuses) < len(pod.Spec.Containers):
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		switch {
		case c.State.Running != nil && after(c.State.Running.StartedAt):
		case c.State.Terminated != nil:
		case c.State.Waiting != nil && c.LastTerminationState.Terminated != nil && after(c.LastTerminationState.Terminated.FinishedAt):
			// between two restarts (CrashLoopBackOff): the instance that
			// ran the operation ended after it started
		default:
			return false
		}
	}
	return true
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
