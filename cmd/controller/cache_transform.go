package main

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
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
	if s, ok := obj.(*v1alpha1.Stack); ok {
		compactStatus(&s.Status)
	}
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

// compactStatus makes a cached Stack's status take less memory without
// changing a byte of what it says, so that a Stack's cost stays small as its
// history fills (up to v1alpha1.MaxHistory records; a fleet's 10,000 Stacks
// hold 100,000):
//
//   - the history and conditions get slices of their exact length: the JSON
//     decoder grows a slice by doubling, so 10 records sat in room for 16;
//   - the strings that repeat across records and across a fleet (the
//     revision every Stack applied, operation types and outcomes, hosts,
//     messages such as "0 created, 0 updated, …", condition reasons and
//     messages) are shared through cacheStrings, one copy each instead of
//     one per record.
//
// Everything read from the cache is a deep copy, which shares strings (Go
// strings are immutable), so no reader can change a shared one.
func compactStatus(st *v1alpha1.StackStatus) {
	if len(st.History) > 0 {
		h := make([]v1alpha1.OperationRecord, len(st.History))
		copy(h, st.History)
		for i := range h {
			compactRecord(&h[i])
		}
		st.History = h
	}
	if st.CurrentOperation != nil {
		compactRecord(st.CurrentOperation)
	}
	if len(st.Conditions) > 0 {
		c := make([]metav1.Condition, len(st.Conditions))
		copy(c, st.Conditions)
		for i := range c {
			c[i].Type, c[i].Reason, c[i].Message = intern(c[i].Type), intern(c[i].Reason), intern(c[i].Message)
		}
		st.Conditions = c
	}
	st.LastAttemptedRevision = intern(st.LastAttemptedRevision)
	st.LastAppliedRevision = intern(st.LastAppliedRevision)
	st.LastAppliedProgramDigest = intern(st.LastAppliedProgramDigest)
	st.LastAttemptedProgramDigest = intern(st.LastAttemptedProgramDigest)
}

func compactRecord(r *v1alpha1.OperationRecord) {
	r.Type = v1alpha1.OperationType(intern(string(r.Type)))
	r.Outcome = v1alpha1.OperationOutcome(intern(string(r.Outcome)))
	r.Revision, r.Message, r.Host = intern(r.Revision), intern(r.Message), intern(r.Host)
}

// cacheStrings is the one interner of every informer's transform.
var cacheStrings = newInterner(4096)

func intern(s string) string { return cacheStrings.intern(s) }
