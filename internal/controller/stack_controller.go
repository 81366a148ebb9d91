package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// Executor runs one operation to its result (internal/executor.Local in process mode).
type Executor interface {
	Run(ctx context.Context, spec runner.Spec) (runner.Result, error)
}

// StackReconciler keeps each Stack's infrastructure equal to its program.
type StackReconciler struct {
	client.Client
	// APIReader reads Secrets and ConfigMaps straight from the API server, so the
	// controller caches no Secret data (it watches their metadata only).
	APIReader     client.Reader
	EventRecorder events.EventRecorder
	Executor      Executor
	Source        *GitSource
	Artifacts     *artifact.Store
	// WorkDir holds one private copy of the program per operation.
	WorkDir string
	// PulumiHome is shared by every operation so plugins are installed once.
	PulumiHome string
	// PulumiCommand is the pulumi binary the runner drives ("" = from PATH).
	PulumiCommand string
	// DefaultBackend is used when spec.backend is empty; {namespace} is replaced
	// (or /<namespace> appended) so that namespaces never share state by accident.
	DefaultBackend string
	// DefaultPassphraseSecret names a Secret in the Stack's namespace holding the
	// passphrase when the spec names none.
	DefaultPassphraseSecret string
	// Host is this controller's host name (in a Pod, the Pod's name), recorded
	// with each operation so that its lock can be told apart from others'.
	Host string
	// PodNamespace is the controller Pod's namespace (env POD_NAMESPACE), where
	// it looks for the Pod of an interrupted operation; empty outside a Pod.
	PodNamespace string

	inflight inflightOps
}

// stepFunc is one step of a reconcile; it sets only its own conditions.
type stepFunc func(ctx context.Context, st *reconcileState) (stepResult, error)

type stepResult int

const (
	stepContinue stepResult = iota // go on to the next step
	stepDone                       // the reconcile is complete; requeue at the interval
)

// reconcileState carries what earlier steps found to later ones.
type reconcileState struct {
	stack       *v1alpha1.Stack
	patcher     *patch.SerialPatcher
	revision    string // resolved source revision, Flux format
	gitRevision git.Revision
	gitAuth     *git.Auth
	artifact    artifact.Artifact
	inputs      *inputs
	decision    decision
	// requeueAfter overrides the interval for the next reconcile when set.
	requeueAfter time.Duration
	// result is the outcome of this reconcile's up, when one ran and succeeded.
	result *runner.Result
	// recovered is the interrupted operation found at the start, if any.
	recovered *v1alpha1.OperationRecord
}

// Reconcile is the entry point of controller-runtime.
func (r *StackReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	stack := &v1alpha1.Stack{}
	if err := r.Get(ctx, req.NamespacedName, stack); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := &reconcileState{stack: stack, patcher: patch.NewSerialPatcher(stack, r.Client)}

	defer func() {
		result, retErr = r.summarize(ctx, st, retErr)
	}()

	if !stack.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, st)
	}
	if !controllerutil.ContainsFinalizer(stack, v1alpha1.StackFinalizer) {
		controllerutil.AddFinalizer(stack, v1alpha1.StackFinalizer)
		// Persist the finalizer before anything can be created.
		if err := st.patcher.Patch(ctx, stack); err != nil {
			return ctrl.Result{}, err
		}
	}
	if stack.Spec.Suspend {
		log.FromContext(ctx).V(1).Info("suspended")
		return ctrl.Result{}, nil
	}

	for _, step := range []stepFunc{
		r.recoverInterrupted,
		r.resolveSource,
		r.resolveInputs,
		r.decide,
		r.restoreOutputs,
		r.fetchArtifact,
		r.runUp,
		r.publishOutputs,
	} {
		res, err := step(ctx, st)
		if err != nil {
			return ctrl.Result{}, err
		}
		if res == stepDone {
			break
		}
	}
	return ctrl.Result{RequeueAfter: st.requeueAfter}, nil
}

// summarize computes Ready from the outcome of the steps and patches status once.
func (r *StackReconciler) summarize(ctx context.Context, st *reconcileState, recErr error) (ctrl.Result, error) {
	stack := st.stack
	if !stack.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(stack, v1alpha1.StackFinalizer) {
		return ctrl.Result{}, recErr // finalized: the object is going away
	}
	if v, ok := requestedAt(stack); ok {
		stack.Status.LastHandledReconcileAt = v
	}
	res := ctrl.Result{}
	stall, _ := outermostTyped(recErr).(*StallingError)
	wait, _ := outermostTyped(recErr).(*WaitingError)
	switch {
	case stack.Spec.Suspend && stack.DeletionTimestamp.IsZero():
		conditions.Delete(stack, v1alpha1.ReconcilingCondition)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		if conditions.Get(stack, v1alpha1.ReadyCondition) == nil || conditions.IsTrue(stack, v1alpha1.ReadyCondition) {
			conditions.MarkTrue(stack, v1alpha1.ReadyCondition, v1alpha1.SuspendedReason, "Reconciliation is suspended")
		}
		stack.Status.ObservedGeneration = stack.Generation
	case recErr == nil:
		conditions.Delete(stack, v1alpha1.ReconcilingCondition)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		stack.Status.ObservedGeneration = stack.Generation
		res.RequeueAfter = stack.GetRequeueAfter()
		if st.requeueAfter > 0 {
			res.RequeueAfter = st.requeueAfter
		}
	case stall != nil:
		conditions.MarkStalled(stack, stall.Reason, "%s", scrubMsg(st, stall.Error()))
		conditions.Delete(stack, v1alpha1.ReconcilingCondition)
		conditions.MarkFalse(stack, v1alpha1.ReadyCondition, stall.Reason, "%s", scrubMsg(st, stall.Error()))
		stack.Status.ObservedGeneration = stack.Generation
		r.event(stack, corev1.EventTypeWarning, stall.Reason, "Stalled", scrubMsg(st, stall.Error()))
		recErr = nil // no retry until something changes
	case wait != nil:
		conditions.Delete(stack, v1alpha1.StalledCondition)
		conditions.MarkReconciling(stack, v1alpha1.ProgressingReason, "Waiting: %s", scrubMsg(st, wait.Error()))
		conditions.MarkFalse(stack, v1alpha1.ReadyCondition, wait.Reason, "%s", scrubMsg(st, wait.Error()))
		res.RequeueAfter = wait.RequeueAfter
		if res.RequeueAfter == 0 {
			res.RequeueAfter = stack.GetRetryInterval()
		}
		recErr = nil
	default:
		reason := reasonOf(recErr, v1alpha1.OperationFailedReason)
		conditions.Delete(stack, v1alpha1.StalledCondition)
		conditions.MarkReconciling(stack, meta.ProgressingWithRetryReason, "Retrying: %s", scrubMsg(st, recErr.Error()))
		conditions.MarkFalse(stack, v1alpha1.ReadyCondition, reason, "%s", scrubMsg(st, recErr.Error()))
		// Failures back off through the status (decide), not the workqueue, so a
		// new revision is never held back by an old failure's backoff.
		res.RequeueAfter = st.requeueAfter
		if res.RequeueAfter == 0 {
			res.RequeueAfter = stack.GetRetryInterval()
		}
		recErr = nil
	}
	if err := st.patcher.Patch(ctx, stack,
		patch.WithOwnedConditions{Conditions: ownedConditions},
		patch.WithFieldOwner("stackpilot-controller"),
	); err != nil {
		if !stack.DeletionTimestamp.IsZero() && apierrors.IsNotFound(err) {
			return res, recErr
		}
		return ctrl.Result{}, kerrors.NewAggregate([]error{recErr, err})
	}
	return res, recErr
}

var ownedConditions = []string{
	v1alpha1.ReadyCondition, v1alpha1.ReconcilingCondition, v1alpha1.StalledCondition,
}

func scrubMsg(st *reconcileState, msg string) string {
	if st.inputs == nil {
		return msg
	}
	return scrub(msg, st.inputs.secrets)
}

// event records a Kubernetes event about a Stack.
func (r *StackReconciler) event(stack *v1alpha1.Stack, eventType, reason, action, note string) {
	if r.EventRecorder == nil {
		return
	}
	r.EventRecorder.Eventf(stack, nil, eventType, reason, action, "%s", note)
}

func (r *StackReconciler) recordf(stack *v1alpha1.Stack, eventType, reason, action, format string, args ...any) {
	r.event(stack, eventType, reason, action, fmt.Sprintf(format, args...))
}
