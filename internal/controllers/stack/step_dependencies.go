package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// dependencyRequeue is how soon a Stack waiting for a dependency looks again
// (Flux's --requeue-dependency default).
// The watch on Stacks (setup.go) wakes it as soon as the dependency's status
// changes; this requeue only covers a missed event.
const dependencyRequeue = 30 * time.Second

// dependency is one Stack this Stack waits for: from spec.dependsOn, or the
// upstream of a configFrom stackOutputs (an implicit dependency: its outputs
// are only final once it is Ready).
type dependency struct {
	namespace, name string
	field           string // where the spec names it, for messages
}

func (d dependency) key() string { return d.namespace + "/" + d.name }

// dependenciesOf lists stack's dependencies, each once, in the order the spec
// names them.
func dependenciesOf(stack *v1alpha1.Stack) []dependency {
	var deps []dependency
	seen := map[string]bool{}
	add := func(ref v1alpha1.DependencyReference, field string) {
		ns, name := ref.Namespaced(stack.Namespace)
		d := dependency{namespace: ns, name: name, field: field}
		if !seen[d.key()] {
			seen[d.key()] = true
			deps = append(deps, d)
		}
	}
	for i, ref := range stack.Spec.DependsOn {
		add(ref, fmt.Sprintf("spec.dependsOn[%d]", i))
	}
	for i, c := range stack.Spec.ConfigFrom {
		if o := c.StackOutputs; o != nil {
			add(v1alpha1.DependencyReference{Name: o.Name, Namespace: o.Namespace}, fmt.Sprintf("spec.configFrom[%d].stackOutputs", i))
		}
	}
	return deps
}

// checkDependencies holds the Stack until every dependency is Ready at its
// latest generation with nothing pending. As Flux's Kustomization does with
// its dependsOn, the check comes first at every reconcile, whether or not
// this Stack has anything to apply: while a dependency is not Ready, this
// Stack is not Ready either (DependencyNotReady) and runs nothing, not even a
// drift check; what it applied stays as it is. A cross-namespace reference
// the controller does not allow, and a cycle, are Stalled: only a change of
// the spec (here or along the cycle) can clear them.
func (r *StackReconciler) checkDependencies(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	deps := dependenciesOf(stack)
	if len(deps) == 0 {
		return stepContinue, nil
	}
	for _, d := range deps {
		if d.namespace != stack.Namespace && !r.AllowCrossNamespaceRefs {
			return stepDone, stalling(v1alpha1.CrossNamespaceRefNotAllowedReason,
				"%s: Stack %s is in another namespace; the controller refuses cross-namespace references unless it runs with --allow-cross-namespace-refs",
				d.field, d.key())
		}
	}
	if cycle := findCycle(stack, r.cachedStack(ctx)); cycle != nil {
		return stepDone, stalling(v1alpha1.DependencyCycleReason,
			"spec.dependsOn and configFrom stackOutputs form a cycle: %s; remove one of these references", strings.Join(cycle, " -> "))
	}
	for _, d := range deps {
		var up v1alpha1.Stack
		err := r.getStack(ctx, client.ObjectKey{Namespace: d.namespace, Name: d.name}, &up)
		if apierrors.IsNotFound(err) {
			return stepDone, dependencyNotReady(stack, d, "not found")
		}
		if err != nil {
			return stepDone, transient(v1alpha1.DependencyNotReadyReason, fmt.Errorf("%s: read Stack %s: %w", d.field, d.key(), err))
		}
		if why := notReadyBecause(&up, st.stack, st.revision); why != "" {
			return stepDone, dependencyNotReady(stack, d, why)
		}
	}
	return stepContinue, nil
}

func dependencyNotReady(stack *v1alpha1.Stack, d dependency, why string) *WaitingError {
	return &WaitingError{
		Reason:       v1alpha1.DependencyNotReadyReason,
		Err:          fmt.Errorf("dependency %s (%s) %s", upstreamName(stack.Namespace, d.namespace, d.name), d.field, why),
		RequeueAfter: dependencyRequeue,
	}
}

// notReadyBecause says why up cannot be relied on yet, or "" when it can: it
// exists, is not being deleted, has applied something, is Ready at its latest
// generation, and has nothing pending (no operation that changes it running,
// no plan waiting for approval, no attempt that failed or was never
// applied). When both Stacks follow the same source, up must also have
// applied the revision this Stack resolved: a commit that changes both
// reaches the upstream first.
//
// A PreviewOnly dependency is relied on at its last applied state: it
// previews every change and applies none, so its pending plan, and a
// revision of the same source that it will never apply, are no reason to
// wait (that wait would never end). A dependent sees what it applied, as
// its outputs do.
func notReadyBecause(up, stack *v1alpha1.Stack, revision string) string {
	s := &up.Status
	ready := conditions.Get(up, v1alpha1.ReadyCondition)
	previewOnly := up.GetApprovalMode() == v1alpha1.ApprovalPreviewOnly
	switch {
	case !up.DeletionTimestamp.IsZero():
		return "is being deleted"
	case s.ObservedGeneration != up.Generation || (ready != nil && ready.ObservedGeneration != up.Generation):
		return fmt.Sprintf("has not reconciled its latest generation (%d) yet", up.Generation)
	case s.CurrentOperation != nil && changesStack(s.CurrentOperation.Type):
		return fmt.Sprintf("is running an operation (%s %s)", s.CurrentOperation.Type, s.CurrentOperation.ID)
	case ready == nil || ready.Status != metav1.ConditionTrue:
		if ready == nil {
			return "is not Ready yet"
		}
		return fmt.Sprintf("is not Ready (%s: %s)", ready.Reason, boundMessage(firstLine(ready.Message), 200))
	case s.PendingPlan != nil && !previewOnly:
		return fmt.Sprintf("has a plan waiting for approval (%s)", s.PendingPlan.ID)
	case s.LastAppliedProgramDigest == "" && previewOnly:
		return "has not applied anything, and never will while its spec.approval.mode is PreviewOnly: set it to Auto or Manual, or remove the dependency"
	case s.LastAppliedProgramDigest == "":
		return "has not applied anything yet"
	case s.LastAttemptedProgramDigest != s.LastAppliedProgramDigest || s.LastAttemptedInputsDigest != s.InputsDigest:
		return "has a change that is not applied (its last attempt did not succeed)"
	case revision != "" && sameSource(up, stack) && s.LastAppliedRevision != revision && !previewOnly:
		return fmt.Sprintf("has not applied revision %s yet (it is at %s)", revision, s.LastAppliedRevision)
	}
	return ""
}

// changesStack is false for the operations that apply nothing (a drift
// check, a preview): a dependency that runs one stays usable, so that hourly
// checks upstream do not make every downstream Stack flap.
func changesStack(t v1alpha1.OperationType) bool {
	return t != v1alpha1.OperationDriftCheck && t != v1alpha1.OperationPreview
}

// sameSource is true when a and b follow the same repository and reference
// (their dirs may differ): their revisions are then comparable.
func sameSource(a, b *v1alpha1.Stack) bool {
	x, y := a.Spec.Source, b.Spec.Source
	switch {
	case x.Git != nil && y.Git != nil:
		return x.Git.URL == y.Git.URL && gitRef(x.Git.Ref) == gitRef(y.Git.Ref)
	case x.OCI != nil && y.OCI != nil:
		return x.OCI.URL == y.OCI.URL && equality.Semantic.DeepEqual(x.OCI.Ref, y.OCI.Ref)
	case x.SourceRef != nil && y.SourceRef != nil:
		xs, ys := *x.SourceRef, *y.SourceRef
		if xs.Namespace == "" {
			xs.Namespace = a.Namespace
		}
		if ys.Namespace == "" {
			ys.Namespace = b.Namespace
		}
		return xs == ys
	}
	return false
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// cachedStack reads Stacks from the manager's cache, for the cycle walk.
func (r *StackReconciler) cachedStack(ctx context.Context) func(namespace, name string) *v1alpha1.Stack {
	return func(namespace, name string) *v1alpha1.Stack {
		var s v1alpha1.Stack
		if err := r.getStack(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
			return nil
		}
		return &s
	}
}

// findCycle walks the dependencies from start (its spec as given, the others'
// as get returns them) and returns a path that leads back to start, as
// names ("a", "b", "a"; namespace/name for another namespace), or nil. Only a
// cycle through start is start's: a Stack that depends on a cycle it is not
// part of waits for it (DependencyNotReady), while the Stacks of the cycle
// are Stalled.
func findCycle(start *v1alpha1.Stack, get func(namespace, name string) *v1alpha1.Stack) []string {
	origin := stackKey(start)
	visited := map[string]bool{origin: true}
	path := []string{origin}
	var walk func(s *v1alpha1.Stack) bool
	walk = func(s *v1alpha1.Stack) bool {
		for _, d := range dependenciesOf(s) {
			k := d.key()
			if k == origin {
				path = append(path, k)
				return true
			}
			if visited[k] {
				continue
			}
			visited[k] = true
			next := get(d.namespace, d.name)
			if next == nil {
				continue
			}
			path = append(path, k)
			if walk(next) {
				return true
			}
			path = path[:len(path)-1]
		}
		return false
	}
	if !walk(start) {
		return nil
	}
	names := make([]string, len(path))
	for i, k := range path {
		ns, name, _ := strings.Cut(k, "/")
		names[i] = upstreamName(start.Namespace, ns, name)
	}
	return names
}
