package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The leader label routes the runner channel to the leader. A runner Pod
// reports to whichever replica the stackpilot-runner Service sends it to,
// and only the replica that started (or adopted) its operation holds its
// credential: the leader. So the leader labels its own Pod
// stackpilot.dev/leader=true once it wins the Lease, the Service selects
// that label (config/manager/service.yaml), and every replica removes it
// from its own Pod at start, before it is ready: a container restarted in
// place keeps its Pod's labels, and a restarted leader is a standby until
// it wins again. Between the old leader's death and the new one's label
// the Service has no endpoint; runner Pods retry (internal/opchannel,
// fetchPatience and resultPatience).
const leaderLabel = "stackpilot.dev/leader"

// ownPod is the controller's own Pod (POD_NAME, POD_NAMESPACE), nil
// outside a Pod: then there is no Service to route, nothing to label.
func ownPod(namespace string) *types.NamespacedName {
	name := os.Getenv("POD_NAME")
	if name == "" {
		return nil
	}
	return &types.NamespacedName{Namespace: namespace, Name: name}
}

// LeaderLabelError says the controller could not label its own Pod: the
// Role of its namespace must let it patch Pods there.
type LeaderLabelError struct {
	Pod    types.NamespacedName
	Leader bool
	Err    error
}

func (e *LeaderLabelError) Error() string {
	verb := "remove the label " + leaderLabel + " from"
	if e.Leader {
		verb = "set the label " + leaderLabel + "=true on"
	}
	return fmt.Sprintf("cannot %s its own Pod %s (the runner Service routes to the leader by it; the controller needs patch on pods in its namespace): %v", verb, e.Pod, e.Err)
}

func (e *LeaderLabelError) Unwrap() error { return e.Err }

// setLeaderLabel sets (leader) or removes the label on pod with a merge
// patch: nothing else of the Pod is touched, and a Pod already so is left
// unwritten.
func setLeaderLabel(ctx context.Context, c client.Client, pod types.NamespacedName, leader bool) error {
	value := "null"
	if leader {
		value = `"true"`
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, leaderLabel, value)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := c.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return &LeaderLabelError{Pod: pod, Leader: leader, Err: err}
	}
	return nil
}

// clearLeaderLabel runs at start, before the manager (so before the
// probes answer ready): the Pod is no leader of this process's. A Pod that
// is not found is no Pod of a Service either.
func clearLeaderLabel(ctx context.Context, c client.Client, pod *types.NamespacedName) error {
	if pod == nil {
		return nil
	}
	err := setLeaderLabel(ctx, c, *pod, false)
	if apierrors.IsNotFound(errors.Unwrap(err)) {
		ctrl.Log.Info("own Pod not found: no leader label to clear", "pod", pod.String())
		return nil
	}
	return err
}

// leaderLabeler is the Runnable that labels the Pod once this replica
// leads, and unlabels it when it stops leading gracefully (SIGTERM), so
// that the Service stops sending runner Pods to a replica that is leaving
// before the next leader labels its own.
type leaderLabeler struct {
	c   client.Client
	pod types.NamespacedName
}

var _ manager.LeaderElectionRunnable = (*leaderLabeler)(nil)

// NeedLeaderElection is true: it starts when this replica wins the Lease.
func (l *leaderLabeler) NeedLeaderElection() bool { return true }

// Start labels the Pod, retrying until it is done or the replica stops
// leading: a leader without the label gets no runner Pod's call.
func (l *leaderLabeler) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("leader-label")
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := setLeaderLabel(ctx, l.c, l.pod, true)
		if err == nil {
			log.Info("leading: labelled own Pod", "pod", l.pod.String(), "label", leaderLabel)
			break
		}
		log.Error(err, "retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	<-ctx.Done()
	// Best effort: a replica that dies instead leaves the label on a Pod
	// that is not ready (or is gone), and clears it when it restarts.
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := setLeaderLabel(stop, l.c, l.pod, false); err != nil {
		log.Error(err, "stopping")
	}
	return nil
}

// setupLeaderLabel clears the label of this replica's Pod (at once, before
// the manager starts) and adds the Runnable that sets it when this replica
// leads. Outside a Pod it does nothing.
func setupLeaderLabel(mgr manager.Manager, c client.Client, namespace string) error {
	pod := ownPod(namespace)
	if pod == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clearLeaderLabel(ctx, c, pod); err != nil {
		return err
	}
	return mgr.Add(&leaderLabeler{c: c, pod: *pod})
}
