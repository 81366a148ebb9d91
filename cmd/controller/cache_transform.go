package main

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// cacheOptions is what the manager's cache holds: on a shard only the
// Stacks, Receivers and Alerts its selector matches (what it reads of other
// shards' Stacks it reads from the API server: docs/guide/sharding.md), only
// the watched namespaces when --watch-namespace lists some, and every
// object trimmed by trimForCache.
func cacheOptions(sel labels.Selector, namespaces []string) cache.Options {
	opts := cache.Options{ByObject: shardedObjects(sel), DefaultTransform: trimForCache}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// lastAppliedAnnotation is where `kubectl apply` (client-side) keeps a
// copy of the whole object it applied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// trimForCache is every informer's transform: it drops, before an object
// is cached, what the controller never reads from its cache and what grows
// with the object rather than with what the controller needs, so that its
// memory per Stack stays small and does not grow with how a Stack was
// written (docs/guide/operations.md, "Fleets"):
//
//   - managedFields: server-side apply's bookkeeping, a few KiB an object
//     and more with every manager that wrote it;
//   - the last-applied-configuration annotation: a second copy of the whole
//     object as kubectl last applied it;
//   - every annotation of a Secret or a ConfigMap, of which only the
//     metadata is watched (name and resourceVersion, to wake the Stacks that
//     read them): an annotation can hold anything, the last-applied copy of
//     a Secret holds its data, and Secret data is never to be in the
//     controller's memory.
//
// The controller never writes an object from its cache with an update (its
// writes are patches of what changed, or updates of objects read from the
// API server), so nothing dropped here can be written back as removed.
func trimForCache(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // not an object (a tombstone of a deletion): kept as it is
	}
	m.SetManagedFields(nil)
	if p, ok := obj.(*metav1.PartialObjectMetadata); ok && p.APIVersion == "v1" && (p.Kind == "Secret" || p.Kind == "ConfigMap") {
		p.Annotations = nil
		return obj, nil
	}
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastAppliedAnnotation]; ok {
			delete(a, lastAppliedAnnotation)
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}
