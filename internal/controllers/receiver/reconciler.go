package receiver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	webhook "github.com/stackpilot/stackpilot/internal/receiver"
)

// Reconciler keeps the webhook server's Index in step with the
// Receivers: it reads each one's Secret, serves its path, and reports the
// path and Ready in status.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader // Secrets are read uncached: their data is never cached
	Index     *webhook.Index
}

// SetupWithManager registers the reconciler; a change to a Secret (its
// metadata is watched, not its data) reconciles the Receivers naming it.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Receiver{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.naming),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// Every replica fills its own Index (the webhooks are served by every
		// replica, webhook.Listener); they write the same status, derived from
		// the Receiver and its Secret alone.
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: 2, NeedLeaderElection: ptr.To(false)}).
		Named("receiver").
		Complete(r)
}

func (r *Reconciler) naming(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.ReceiverList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, rcv := range list.Items {
		if rcv.Spec.SecretRef.Name == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rcv.Namespace, Name: rcv.Name}})
		}
	}
	return out
}

// Reconcile serves or stops serving one Receiver.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var rcv v1alpha1.Receiver
	if err := r.Client.Get(ctx, req.NamespacedName, &rcv); err != nil {
		if apierrors.IsNotFound(err) {
			r.Index.Delete(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if !rcv.DeletionTimestamp.IsZero() {
		r.Index.Delete(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	before := rcv.DeepCopy()
	err := r.serve(ctx, &rcv)
	rcv.Status.ObservedGeneration = rcv.Generation
	if perr := r.Client.Status().Patch(ctx, &rcv, client.MergeFrom(before)); perr != nil && !apierrors.IsNotFound(perr) {
		return reconcile.Result{}, perr
	}
	return reconcile.Result{}, err
}

// serve reads the token, indexes the path and sets Ready.
func (r *Reconciler) serve(ctx context.Context, rcv *v1alpha1.Receiver) error {
	key := types.NamespacedName{Namespace: rcv.Namespace, Name: rcv.Name}
	token, err := r.token(ctx, rcv)
	if err != nil {
		r.Index.Delete(key)
		rcv.Status.WebhookPath = ""
		r.setReady(rcv, metav1.ConditionFalse, v1alpha1.ReceiverSecretNotFoundReason, err.Error())
		if apierrors.IsNotFound(err) || isMissingToken(err) {
			return nil // the Secret watch brings us back
		}
		return err
	}
	var selector labels.Selector
	if rcv.Spec.Resources != nil {
		selector, err = metav1.LabelSelectorAsSelector(rcv.Spec.Resources)
		if err != nil {
			r.Index.Delete(key)
			r.setReady(rcv, metav1.ConditionFalse, v1alpha1.InvalidSpecReason, "spec.resources: "+err.Error())
			return nil
		}
	}
	path := webhook.WebhookPath(token, rcv.Name, rcv.Namespace)
	r.Index.Set(path, &webhook.Target{Key: key, Type: rcv.Spec.Type, Events: rcv.Spec.Events,
		Selector: selector, Suspend: rcv.Spec.Suspend, Token: token,
		AcceptUnsigned: rcv.Spec.AcceptUnsigned && rcv.Spec.Type == v1alpha1.OCIReceiver})
	rcv.Status.WebhookPath = path
	if rcv.Spec.Suspend {
		r.setReady(rcv, metav1.ConditionTrue, v1alpha1.ReceiverSuspendedReason, "Serving "+path+"; events are ignored while spec.suspend is true")
		return nil
	}
	r.setReady(rcv, metav1.ConditionTrue, v1alpha1.ReceiverServingReason, "Serving "+path)
	return nil
}

type missingTokenError struct{ secret string }

func (e *missingTokenError) Error() string {
	return fmt.Sprintf("spec.secretRef: Secret %s has no non-empty key %q: put the shared secret there", e.secret, v1alpha1.ReceiverTokenKey)
}

func isMissingToken(err error) bool {
	_, ok := err.(*missingTokenError)
	return ok
}

func (r *Reconciler) token(ctx context.Context, rcv *v1alpha1.Receiver) ([]byte, error) {
	var sec corev1.Secret
	name := rcv.Spec.SecretRef.Name
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rcv.Namespace, Name: name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
		}
		return nil, fmt.Errorf("read Secret %s: %w", name, err)
	}
	token := sec.Data[v1alpha1.ReceiverTokenKey]
	if len(token) == 0 {
		return nil, &missingTokenError{secret: name}
	}
	return token, nil
}

func (r *Reconciler) setReady(rcv *v1alpha1.Receiver, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(&rcv.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: rcv.Generation,
	})
}
