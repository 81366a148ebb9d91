package alert

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/notify"
)

// +kubebuilder:rbac:groups=stackpilot.dev,resources=alerts,verbs=get;list;watch
// +kubebuilder:rbac:groups=stackpilot.dev,resources=alerts/status,verbs=get;update;patch

// Reconciler keeps each Alert's status (Ready, deliveries) and runs the
// notifier: a handler on the Stack informer that sees every update of a
// Stack's status in order, apart from the Stack reconciler, which never
// waits on a message.
type Reconciler struct {
	client.Client
	Notifier *notify.Notifier
}

// NewReconciler makes the reconciler and its notifier: Alerts from the
// manager's cache, Secrets read uncached. denyInternal is the controller's
// --notification-deny-internal-addresses.
func NewReconciler(mgr ctrl.Manager, denyInternal bool) *Reconciler {
	//lint:ignore SA1019 core/v1 Events, as the Stack reconciler's: kubectl describe shows them beside the object.
	n := notify.New(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorderFor("stackpilot-alerts"), denyInternal)
	return &Reconciler{Client: mgr.GetClient(), Notifier: n}
}

// SetupWithManager registers the Alert controller and the notifier. The
// notifier runs only on the leader, and seeds its state from the Stacks as
// they are when it starts: a restart or a new leader sends nothing for
// states that were already there.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(manager.RunnableFunc(r.watchStacks(mgr))); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("alert").
		For(&v1alpha1.Alert{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Notifier.Updates, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

func (r *Reconciler) watchStacks(mgr ctrl.Manager) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx = log.IntoContext(ctx, ctrl.Log.WithName("notifier"))
		r.Notifier.Start(ctx)
		inf, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.Stack{})
		if err != nil {
			return err
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				defer survive(ctx)
				if s, ok := obj.(*v1alpha1.Stack); ok {
					r.Notifier.Observe(ctx, s, nil)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				defer survive(ctx)
				old, _ := oldObj.(*v1alpha1.Stack)
				s, ok := newObj.(*v1alpha1.Stack)
				if ok && old != nil {
					r.Notifier.Observe(ctx, s, old)
				}
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if s, ok := obj.(*v1alpha1.Stack); ok {
					r.Notifier.Forget(client.ObjectKeyFromObject(s))
				}
			},
		})
		if err != nil {
			return err
		}
		<-ctx.Done()
		return inf.RemoveEventHandler(reg)
	}
}

// survive keeps a bug in the notifier from taking the controller down: a
// panic in an informer handler is not recovered by controller-runtime, and
// would stop every reconcile for the sake of a message.
func survive(ctx context.Context) {
	if r := recover(); r != nil {
		log.FromContext(ctx).Error(fmt.Errorf("%v", r), "notifier panicked; the message is lost", "goroutine", string(debug.Stack()))
	}
}

// Reconcile writes the Alert's status: Ready from its provider's settings
// and the last delivery, and the delivery counts.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var alert v1alpha1.Alert
	if err := r.Get(ctx, req.NamespacedName, &alert); err != nil {
		if apierrors.IsNotFound(err) {
			r.Notifier.StopAlert(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	before := alert.DeepCopy()
	stats := r.Notifier.Stats(req.NamespacedName)
	st := &alert.Status
	st.ObservedGeneration = alert.Generation
	// The counts are the running controller's (in memory, like the Stacks'
	// states); lastSent and lastError outlive a restart.
	st.Sent, st.Failures, st.LastSent = stats.Sent, stats.Failures, later(st.LastSent, stats.LastSent)
	if stats.LastError != "" {
		st.LastError, st.LastErrorAt = stats.LastError, stats.LastErrorAt
	}
	var result ctrl.Result
	ready := metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason,
		Message: fmt.Sprintf("Sending to %s", alert.Spec.Provider.Type)}
	_, _, err := notify.ResolveTarget(ctx, r.Notifier.Secrets, &alert)
	switch te, isTarget := notify.IsTargetError(err); {
	case alert.Spec.Suspend:
		ready.Reason, ready.Message = v1alpha1.SuspendedReason, "Suspended: nothing is sent"
	case isTarget:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, te.Reason, te.Msg
		result.RequeueAfter = time.Minute // the Secret is not watched
	case err != nil:
		return ctrl.Result{}, err
	case stats.Failing:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.DeliveryFailedReason, stats.LastError
	}
	ready.ObservedGeneration = alert.Generation
	apimeta.SetStatusCondition(&st.Conditions, ready)
	if err := r.Status().Patch(ctx, &alert, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return result, nil
}

func later(a, b *metav1.Time) *metav1.Time {
	if a == nil || (b != nil && b.After(a.Time)) {
		return b
	}
	return a
}
