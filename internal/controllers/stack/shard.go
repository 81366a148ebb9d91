package stack

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Sharding (docs/guide/sharding.md). A controller run with
// --watch-label-selector caches, and so reconciles, only the Stacks whose
// labels match it (Config.Shard). What it reads of other Stacks (dependsOn,
// stackOutputs, the dependency graph) it reads from its cache when they are
// in its shard and from the API server when they are not.
//
// A Stack relabelled to another shard is handed over like this:
//
//   - The old shard starts no operation on a Stack its selector no longer
//     matches: before each start it reads the Stack's labels from the API
//     server (confirmShard). It ends that reconcile without writing status:
//     the Stack is released.
//   - An operation the old shard had already started runs to its end there,
//     whatever its executor (a Local runner is its child process; a Job's
//     Pod it follows), and the old shard records its end (its status writes
//     read the API server once its cache lost the Stack: cacheOrAPI). That
//     final write is the release.
//   - The new shard does not act while status.currentOperation names an
//     operation started by another shard (OperationRecord.Shard): it waits,
//     Ready False with reason ShardHandoff, until that operation ends, and
//     then decides from the recorded result, so the up that ran is not run
//     again. Should the old shard die meanwhile, the operation outlives its
//     timeout and the new shard then treats it as any controller treats an
//     operation a dead one left: it adopts a Job still running, or records
//     the operation interrupted.

// shardHandoffRequeue is how often a Stack waiting for another shard's
// operation looks again (status changes do not wake a reconcile).
const shardHandoffRequeue = 5 * time.Second

// handoffGrace is added to an operation's timeout before the new shard stops
// waiting for the old one to record its end.
const handoffGrace = 2 * time.Minute

// errReleased ends a reconcile of a Stack that this controller's shard no
// longer serves.
var errReleased = errors.New("the Stack's labels no longer match this controller's --watch-label-selector: it is left to the shard that serves it")

// shardName is this controller's shard as OperationRecord.Shard records it:
// its selector, "" when it is not sharded.
func (r *StackReconciler) shardName() string {
	if r.Shard == nil {
		return ""
	}
	return r.Shard.String()
}

// confirmShard checks with the API server, before an operation starts, that
// this controller's shard still serves the Stack and that no other
// controller has started an operation on it meanwhile. The cache cannot
// tell: it may not have seen the relabelling yet.
func (r *StackReconciler) confirmShard(ctx context.Context, st *reconcileState) error {
	if r.Shard == nil {
		return nil
	}
	fresh := &v1alpha1.Stack{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(st.stack), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return errReleased
		}
		return transient(v1alpha1.OperationFailedReason, fmt.Errorf("confirm the Stack's shard with the API server: %w", err))
	}
	if !r.Shard.Matches(labels.Set(fresh.Labels)) {
		log.FromContext(ctx).Info("released: the Stack was relabelled to another shard; no operation starts here", "selector", r.shardName())
		return errReleased
	}
	if op := fresh.Status.CurrentOperation; op != nil && !r.inflight.running(fresh.UID, op.ID) && !knows(st.stack, op.ID) {
		return &WaitingError{Reason: v1alpha1.ShardHandoffReason, RequeueAfter: shardHandoffRequeue,
			Err: fmt.Errorf("%s %s was started by another controller (shard %q) after this reconcile began; waiting for it to end", op.Type, op.ID, op.Shard)}
	}
	return nil
}

// knows is true when this reconcile's Stack has operation id, running or
// ended (an interrupted one it recovered, whose end is not patched yet).
func knows(stack *v1alpha1.Stack, id string) bool {
	if c := stack.Status.CurrentOperation; c != nil && c.ID == id {
		return true
	}
	for _, h := range stack.Status.History {
		if h.ID == id {
			return true
		}
	}
	return false
}

// awaitOtherShard holds a Stack whose current operation another shard
// started, until that shard records its end (or the operation outlives its
// timeout: that shard is gone).
func (r *StackReconciler) awaitOtherShard(stack *v1alpha1.Stack, op *v1alpha1.OperationRecord) error {
	if op.Shard == r.shardName() {
		return nil
	}
	if time.Since(op.StartedAt.Time) > stack.GetTimeout()+handoffGrace {
		return nil
	}
	return &WaitingError{Reason: v1alpha1.ShardHandoffReason, RequeueAfter: shardHandoffRequeue,
		Err: fmt.Errorf("the Stack moved to this shard while %s %s, started by the controller of shard %q, ran; waiting for that controller to record its end",
			op.Type, op.ID, op.Shard)}
}

// getStack reads a Stack another Stack refers to: from the cache when it is
// there, else, on a sharded controller, from the API server (it may be in
// another shard, which this controller's cache does not hold).
func (r *StackReconciler) getStack(ctx context.Context, key client.ObjectKey, s *v1alpha1.Stack) error {
	err := r.Get(ctx, key, s)
	if r.Shard != nil && apierrors.IsNotFound(err) {
		return r.APIReader.Get(ctx, key, s)
	}
	return err
}

// otherShardsSource wakes the Stacks of this shard that depend on a Stack of
// another shard, whenever that Stack changes (its status included: the
// metadata's resourceVersion moves with every write). Only metadata is
// cached, of every Stack; the Stacks of this shard are left to the typed
// watch (setup_dependencies.go), which also filters what changed.
func (r *StackReconciler) otherShardsSource(all cache.Cache) source.SyncingSource {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Stack"))
	return source.Kind(all, obj, handler.TypedEnqueueRequestsFromMapFunc(
		func(ctx context.Context, up *metav1.PartialObjectMetadata) []reconcile.Request {
			if r.Shard == nil || r.Shard.Matches(labels.Set(up.Labels)) {
				return nil
			}
			return r.dependents(ctx, up)
		}), predicate.TypedResourceVersionChangedPredicate[*metav1.PartialObjectMetadata]{})
}

// cacheOrAPI is the patcher's client on a sharded controller: the patch
// helper reads the latest Stack to merge the conditions into, and once the
// Stack was relabelled to another shard the cache no longer holds it, yet
// the end of an operation that ran here must still land.
type cacheOrAPI struct {
	client.Client
	reader client.Reader
}

func (c cacheOrAPI) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		return c.reader.Get(ctx, key, obj, opts...)
	}
	return err
}
