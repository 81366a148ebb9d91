package policy

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// InvalidError says a policy that selects the Stack does not compile: the
// Stack's changes cannot be checked, so none is made.
type InvalidError struct {
	Policy  string // "<kind> <id>"
	Message string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("%s selects this Stack and does not compile: %s", e.Policy, e.Message)
}

// For gathers the policies that select stack, ClusterStackPolicies first,
// each kind by name: nil when none does. Policies are read from c (the
// manager's cache); the Stack's Namespace, for a namespaceSelector, from
// reader (one GET, uncached: the controller watches no Namespace).
func For(ctx context.Context, c, reader client.Reader, stack *v1alpha1.Stack) (*runner.PolicySpec, error) {
	var out []policy.Policy
	var clusterPolicies v1alpha1.ClusterStackPolicyList
	if err := c.List(ctx, &clusterPolicies); err != nil {
		return nil, fmt.Errorf("list ClusterStackPolicies: %w", err)
	}
	sort.Slice(clusterPolicies.Items, func(i, j int) bool { return clusterPolicies.Items[i].Name < clusterPolicies.Items[j].Name })
	var nsLabels labels.Set
	for i := range clusterPolicies.Items {
		p := &clusterPolicies.Items[i]
		if p.Spec.NamespaceSelector != nil && nsLabels == nil {
			var ns corev1.Namespace
			if err := reader.Get(ctx, client.ObjectKey{Name: stack.Namespace}, &ns); err != nil {
				return nil, fmt.Errorf("read Namespace %s for ClusterStackPolicy %s: %w", stack.Namespace, p.Name, err)
			}
			nsLabels = labels.Set(ns.Labels)
		}
		ok, err := selects(p.Spec.NamespaceSelector, nsLabels)
		if err != nil {
			return nil, &InvalidError{Policy: KindClusterStackPolicy + " " + p.Name, Message: "spec.namespaceSelector: " + err.Error()}
		}
		if !ok {
			continue
		}
		if ok, err = selects(p.Spec.Selector, stack.Labels); err != nil {
			return nil, &InvalidError{Policy: KindClusterStackPolicy + " " + p.Name, Message: "spec.selector: " + err.Error()}
		}
		if ok {
			out = append(out, ClusterStackPolicy(p))
		}
	}
	var stackPolicies v1alpha1.StackPolicyList
	if err := c.List(ctx, &stackPolicies, client.InNamespace(stack.Namespace)); err != nil {
		return nil, fmt.Errorf("list StackPolicies: %w", err)
	}
	sort.Slice(stackPolicies.Items, func(i, j int) bool { return stackPolicies.Items[i].Name < stackPolicies.Items[j].Name })
	for i := range stackPolicies.Items {
		p := &stackPolicies.Items[i]
		ok, err := selects(p.Spec.Selector, stack.Labels)
		if err != nil {
			return nil, &InvalidError{Policy: KindStackPolicy + " " + p.Namespace + "/" + p.Name, Message: "spec.selector: " + err.Error()}
		}
		if ok {
			out = append(out, StackPolicy(p))
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	for _, p := range out {
		if _, err := policy.Compile(p); err != nil {
			return nil, &InvalidError{Policy: p.String(), Message: Invalid(err)}
		}
	}
	return &runner.PolicySpec{Stack: policy.Stack{Namespace: stack.Namespace, Name: stack.Name, Labels: stack.Labels}, Policies: out}, nil
}

// selects says whether sel (nil: everything) matches set.
func selects(sel *metav1.LabelSelector, set map[string]string) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(set)), nil
}
