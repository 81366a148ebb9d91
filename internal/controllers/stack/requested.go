package stack

import (
	"github.com/fluxcd/pkg/apis/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// requestedAt reads the reconcile-now annotation: Stackpilot's own, or Flux's so
// that `flux reconcile`-style tooling works too.
func requestedAt(obj client.Object) (string, bool) {
	a := obj.GetAnnotations()
	if v, ok := a[v1alpha1.ReconcileRequestAnnotation]; ok {
		return v, true
	}
	v, ok := a[meta.ReconcileRequestAnnotation]
	return v, ok
}

// isRequested is true when a reconcile-now request has not been handled yet.
func isRequested(stack *v1alpha1.Stack) bool {
	v, ok := requestedAt(stack)
	return ok && v != stack.Status.LastHandledReconcileAt
}

// reconcileRequested passes updates that change either reconcile-now annotation.
type reconcileRequested struct{ predicate.Funcs }

func (reconcileRequested) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	oldV, _ := requestedAt(e.ObjectOld)
	newV, ok := requestedAt(e.ObjectNew)
	return ok && newV != oldV
}

// approvalChanged passes updates that change the approve annotation: an
// approval is acted on at once, not at the next interval.
type approvalChanged struct{ predicate.Funcs }

func (approvalChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	return e.ObjectOld.GetAnnotations()[v1alpha1.ApproveAnnotation] != e.ObjectNew.GetAnnotations()[v1alpha1.ApproveAnnotation]
}
