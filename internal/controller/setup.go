package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// referencedIndex indexes Stacks by the Secrets and ConfigMaps they read, as
// "Secret/<name>" and "ConfigMap/<name>".
const referencedIndex = ".metadata.stackpilot.references"

// Options tune the controller.
type Options struct {
	MaxConcurrentReconciles int
}

// SetupWithManager registers the reconciler: Stacks trigger on spec changes and
// reconcile-now requests; Secrets and ConfigMaps they reference trigger on change.
// Only the metadata of Secrets and ConfigMaps is watched, so no Secret data is
// cached in the controller's memory.
func (r *StackReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.Stack{}, referencedIndex, indexReferences); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Stack{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, reconcileRequested{}, approvalChanged{}))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.referencing("Secret")),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.referencing("ConfigMap")),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles})
	b, err := r.watchFluxSources(ctx, mgr, b)
	if err != nil {
		return err
	}
	return b.Complete(r)
}

func indexReferences(obj client.Object) []string {
	stack := obj.(*v1alpha1.Stack)
	var refs []string
	add := func(kind string, ref *v1alpha1.OptionalObjectReference) {
		if ref != nil {
			refs = append(refs, kind+"/"+ref.Name)
		}
	}
	for _, c := range stack.Spec.ConfigFrom {
		add("ConfigMap", c.ConfigMapRef)
		add("Secret", c.SecretRef)
	}
	for _, e := range stack.Spec.EnvFrom {
		add("ConfigMap", e.ConfigMapRef)
		add("Secret", e.SecretRef)
	}
	if ref := stack.Spec.BackendSecretRef; ref != nil {
		refs = append(refs, "Secret/"+ref.Name)
	}
	if sp := stack.Spec.SecretsProvider; sp != nil && sp.PassphraseSecretRef != nil {
		refs = append(refs, "Secret/"+sp.PassphraseSecretRef.Name)
	}
	if g := stack.Spec.Source.Git; g != nil && g.SecretRef != nil {
		refs = append(refs, "Secret/"+g.SecretRef.Name)
	}
	if o := stack.Spec.Source.OCI; o != nil {
		if o.SecretRef != nil {
			refs = append(refs, "Secret/"+o.SecretRef.Name)
		}
		if o.Verify != nil {
			refs = append(refs, "Secret/"+o.Verify.SecretRef.Name)
		}
	}
	return refs
}

// referencing maps a Secret or ConfigMap to the Stacks that read it; the
// controller's default passphrase Secret is read by every Stack without its own.
func (r *StackReconciler) referencing(kind string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var stacks v1alpha1.StackList
		if err := r.List(ctx, &stacks, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{referencedIndex: kind + "/" + obj.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(stacks.Items))
		for _, s := range stacks.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
		if kind == "Secret" && r.DefaultPassphraseSecret != "" && obj.GetName() == r.DefaultPassphraseSecret {
			reqs = append(reqs, r.stacksWithoutPassphrase(ctx, obj.GetNamespace())...)
		}
		return reqs
	}
}

func (r *StackReconciler) stacksWithoutPassphrase(ctx context.Context, ns string) []reconcile.Request {
	var stacks v1alpha1.StackList
	if err := r.List(ctx, &stacks, client.InNamespace(ns)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range stacks.Items {
		if sp := s.Spec.SecretsProvider; sp == nil || sp.PassphraseSecretRef == nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}
