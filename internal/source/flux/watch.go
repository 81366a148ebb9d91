package flux

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// sourceRefIndex indexes Stacks by the Flux source they follow, as
// "<Kind>/<namespace>/<name>".
const sourceRefIndex = ".spec.source.sourceRef"

func indexSourceRef(obj client.Object) []string {
	stack := obj.(*v1alpha1.Stack)
	if stack.Spec.Source.SourceRef == nil {
		return nil
	}
	kind, namespace, name := sourceKey(stack)
	return []string{kind + "/" + namespace + "/" + name}
}

// Watch adds a watch per Flux source kind installed in the
// cluster: a new artifact (or a change of the source's readiness) starts the
// Stacks that follow it at once, so they never wait for their interval. A
// kind whose CRD is missing is not watched (the controller runs without
// Flux); Stacks that follow one wait with SourceNotReady, and installing the
// CRD later needs a controller restart for the watch.
func (k *Kind) Watch(ctx context.Context, mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.Stack{}, sourceRefIndex, indexSourceRef); err != nil {
		return nil, err
	}
	for _, kind := range Kinds {
		gvk := GVK(kind)
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				log.FromContext(ctx).Info("Flux source kind not installed: not watched", "kind", kind, "apiVersion", gvk.GroupVersion().String())
				continue
			}
			return nil, err
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		b = b.Watches(u, handler.EnqueueRequestsFromMapFunc(following(mgr.GetClient(), kind)), builder.WithPredicates(artifactChanged{}))
	}
	return b, nil
}

// following maps a Flux source to the Stacks that follow it, in any
// namespace (cross-namespace references are refused when reconciled), as
// the manager's cache lists them.
func following(c client.Reader, kind string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var stacks v1alpha1.StackList
		if err := c.List(ctx, &stacks, client.MatchingFields{sourceRefIndex: kind + "/" + obj.GetNamespace() + "/" + obj.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "listing the Stacks that follow a source", "kind", kind, "source", client.ObjectKeyFromObject(obj))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(stacks.Items))
		for _, s := range stacks.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
		return reqs
	}
}

// artifactChanged passes a source's creation and deletion, and updates that
// change its artifact or its Ready condition: source-controller rewrites
// status at every poll, and those must not wake every Stack.
type artifactChanged struct{}

func (artifactChanged) Create(event.CreateEvent) bool   { return true }
func (artifactChanged) Delete(event.DeleteEvent) bool   { return true }
func (artifactChanged) Generic(event.GenericEvent) bool { return false }

func (artifactChanged) Update(e event.UpdateEvent) bool {
	oldObj, ok1 := e.ObjectOld.(*unstructured.Unstructured)
	newObj, ok2 := e.ObjectNew.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return true
	}
	oldSrc, err1 := FromUnstructured(oldObj)
	newSrc, err2 := FromUnstructured(newObj)
	if err1 != nil || err2 != nil {
		return true
	}
	if !reflect.DeepEqual(artifactIdentity(oldSrc.Artifact), artifactIdentity(newSrc.Artifact)) {
		return true
	}
	return readyStatus(oldSrc) != readyStatus(newSrc)
}

// artifactIdentity is what names an artifact's content; the URL and size
// follow from it.
func artifactIdentity(a *Artifact) [2]string {
	if a == nil {
		return [2]string{}
	}
	return [2]string{a.Revision, a.Digest}
}

func readyStatus(s *Source) string {
	if s.Ready == nil {
		return ""
	}
	return string(s.Ready.Status)
}
