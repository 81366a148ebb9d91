package stack

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	// AllStacks, on a sharded controller, is a cache of the metadata of
	// every Stack, all shards' (shard.go): a Stack of another shard wakes
	// the Stacks of this one that depend on it.
	AllStacks cache.Cache
}

// SetupWithManager registers the reconciler: Stacks trigger on spec changes and
// reconcile-now requests, and the Stacks that depend on a Stack trigger when
// its status changes in a way they wait for (setup_dependencies.go); Secrets
// and ConfigMaps they reference trigger on change, and so do the policies
// that may select them, for the Stacks a policy stopped (policies.go).
// Only the metadata of Secrets and ConfigMaps is watched, so no Secret data is
// cached in the controller's memory.
func (r *StackReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.Stack{}, referencedIndex, r.indexReferences); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.Stack{}, dependsOnIndex, indexDependencies); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Stack{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, reconcileRequested{}, approvalChanged{}))).
		Watches(&v1alpha1.Stack{}, handler.EnqueueRequestsFromMapFunc(r.dependents),
			builder.WithPredicates(dependencyChanged{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.referencing("Secret")),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.referencing("ConfigMap")),
			builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(&v1alpha1.StackPolicy{}, handler.EnqueueRequestsFromMapFunc(r.stoppedByPolicies),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ClusterStackPolicy{}, handler.EnqueueRequestsFromMapFunc(r.stoppedByPolicies),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles})
	if opts.AllStacks != nil {
		b = b.WatchesRawSource(r.otherShardsSource(opts.AllStacks))
	}
	// Each source kind watches what its Stacks follow (a Flux source's
	// artifact).
	for _, kind := range r.Sources {
		var err error
		if b, err = kind.Watch(ctx, mgr, b); err != nil {
			return err
		}
	}
	return b.Complete(r)
}

func (r *StackReconciler) indexReferences(obj client.Object) []string {
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
	for _, kind := range r.Sources { // a kind not the Stack's names none
		for _, name := range kind.Secrets(stack) {
			refs = append(refs, "Secret/"+name)
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
		if kind == "Secret" {
			// A Stack's outputs Secret: the Stacks that read its outputs.
			reqs = append(reqs, r.outputsReaders(ctx, obj)...)
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
