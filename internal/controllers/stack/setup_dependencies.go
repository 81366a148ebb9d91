package stack

import (
	"context"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// dependsOnIndex indexes Stacks by the Stacks they depend on (spec.dependsOn
// and configFrom stackOutputs), as "<namespace>/<name>".
const dependsOnIndex = ".spec.stackpilot.dependsOn"

func indexDependencies(obj client.Object) []string {
	deps := dependenciesOf(obj.(*v1alpha1.Stack))
	keys := make([]string, 0, len(deps))
	for _, d := range deps {
		keys = append(keys, d.key())
	}
	return keys
}

// dependents maps a Stack to the Stacks that depend on it, so that a
// downstream Stack starts within a second of its dependency becoming Ready,
// and reads new outputs as soon as they are there, not at its interval.
func (r *StackReconciler) dependents(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.stacksDependingOn(ctx, obj.GetNamespace()+"/"+obj.GetName(), false)
}

// stacksDependingOn lists the Stacks that depend on the Stack key; with
// outputsOnly, those that read its outputs.
func (r *StackReconciler) stacksDependingOn(ctx context.Context, key string, outputsOnly bool) []reconcile.Request {
	var stacks v1alpha1.StackList
	if err := r.List(ctx, &stacks, client.MatchingFields{dependsOnIndex: key}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(stacks.Items))
	for i := range stacks.Items {
		s := &stacks.Items[i]
		if outputsOnly && !readsOutputsOf(s, key) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
	return reqs
}

func readsOutputsOf(s *v1alpha1.Stack, key string) bool {
	for _, c := range s.Spec.ConfigFrom {
		if o := c.StackOutputs; o != nil {
			ns, name := v1alpha1.DependencyReference{Name: o.Name, Namespace: o.Namespace}.Namespaced(s.Namespace)
			if ns+"/"+name == key {
				return true
			}
		}
	}
	return false
}

// outputsReaders maps an outputs Secret (one controlled by a Stack) to the
// Stacks that read that Stack's outputs: a secret output that changed shows
// nowhere in the upstream's status, only in this Secret.
func (r *StackReconciler) outputsReaders(ctx context.Context, obj client.Object) []reconcile.Request {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller == nil || !*ref.Controller || ref.Kind != "Stack" {
			continue
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != v1alpha1.GroupVersion.Group {
			continue
		}
		return r.stacksDependingOn(ctx, obj.GetNamespace()+"/"+ref.Name, true)
	}
	return nil
}

// dependencyChanged passes the Stack events a dependent Stack may be
// waiting for: a Stack created or deleted, and any change of what
// notReadyBecause and the output wiring look at, status included (the For
// watch of Stacks passes spec changes only).
type dependencyChanged struct {
	predicate.Funcs
}

func (dependencyChanged) Create(event.CreateEvent) bool   { return true }
func (dependencyChanged) Delete(event.DeleteEvent) bool   { return true }
func (dependencyChanged) Generic(event.GenericEvent) bool { return false }

func (dependencyChanged) Update(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*v1alpha1.Stack)
	cur, okNew := e.ObjectNew.(*v1alpha1.Stack)
	if !okOld || !okNew {
		return false
	}
	return !equality.Semantic.DeepEqual(dependencyViewOf(old), dependencyViewOf(cur))
}

// dependencyView is what a dependent Stack reads of a Stack.
type dependencyView struct {
	Generation, ObservedGeneration int64
	Deleting                       bool
	Ready, ReadyReason             string
	ReadyGeneration                int64
	Operation                      string
	PendingPlan                    string
	LastAppliedRevision            string
	LastAppliedProgramDigest       string
	InputsDigest                   string
	LastAttemptedProgramDigest     string
	LastAttemptedInputsDigest      string
	Outputs                        map[string]string
	OutputsSecret                  string
}

func dependencyViewOf(s *v1alpha1.Stack) dependencyView {
	v := dependencyView{
		Generation:                 s.Generation,
		ObservedGeneration:         s.Status.ObservedGeneration,
		Deleting:                   !s.DeletionTimestamp.IsZero(),
		LastAppliedRevision:        s.Status.LastAppliedRevision,
		LastAppliedProgramDigest:   s.Status.LastAppliedProgramDigest,
		InputsDigest:               s.Status.InputsDigest,
		LastAttemptedProgramDigest: s.Status.LastAttemptedProgramDigest,
		LastAttemptedInputsDigest:  s.Status.LastAttemptedInputsDigest,
		Outputs:                    s.Status.Outputs,
	}
	if c := conditions.Get(s, v1alpha1.ReadyCondition); c != nil {
		v.Ready, v.ReadyReason, v.ReadyGeneration = string(c.Status), c.Reason, c.ObservedGeneration
	}
	if op := s.Status.CurrentOperation; op != nil {
		v.Operation = op.ID
	}
	if p := s.Status.PendingPlan; p != nil {
		v.PendingPlan = p.ID
	}
	if o := s.Spec.Outputs; o != nil {
		v.OutputsSecret = o.SecretName
	}
	return v
}
