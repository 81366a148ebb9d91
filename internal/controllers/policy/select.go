package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// For gathers the policies that select stack (Selecting) and compiles
// them: nil when none does. Digest is that of the policies it returns.
func For(ctx context.Context, c, reader client.Reader, stack *v1alpha1.Stack) (spec *runner.PolicySpec, digest string, err error) {
	out, err := Selecting(ctx, c, reader, stack)
	if invalid, ok := errors.AsType[*InvalidError](err); ok {
		// A selector that does not parse: the error stands for the policies
		// (its fix, or the policy's delete, changes the digest).
		return nil, digestOf([]byte(invalid.Error())), err
	}
	if err != nil {
		return nil, "", err
	}
	if len(out) == 0 {
		return nil, "", nil
	}
	digest = Digest(out)
	for _, p := range out {
		if invalid := compiled.check(p); invalid != "" {
			return nil, digest, &InvalidError{Policy: p.String(), Message: invalid}
		}
	}
	return &runner.PolicySpec{Stack: policy.Stack{Namespace: stack.Namespace, Name: stack.Name, Labels: stack.Labels}, Policies: out}, digest, nil
}

// DigestFor is the digest For would give, without compiling the rules.
func DigestFor(ctx context.Context, c, reader client.Reader, stack *v1alpha1.Stack) (string, error) {
	out, err := Selecting(ctx, c, reader, stack)
	if invalid, ok := errors.AsType[*InvalidError](err); ok {
		return digestOf([]byte(invalid.Error())), nil
	}
	if err != nil {
		return "", err
	}
	return Digest(out), nil
}

// Digest identifies what a set of selecting policies enforces: their
// kinds, names and rules, not their metadata. "" for none. A Stack that a
// policy stopped is retried at once when the digest of the policies that
// select it differs from the one its operation ran with.
func Digest(policies []policy.Policy) string {
	if len(policies) == 0 {
		return ""
	}
	data, err := json.Marshal(policies)
	if err != nil { // plain data: cannot fail
		panic(fmt.Sprintf("policy digest: %v", err))
	}
	return digestOf(data)
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Selecting lists the policies that select stack, ClusterStackPolicies
// first, each kind by name, without compiling them. Policies are read from
// c (the manager's cache); the Stack's Namespace, for a namespaceSelector,
// from reader (one GET, uncached: the controller watches no Namespace). A
// selector that does not parse is an InvalidError.
func Selecting(ctx context.Context, c, reader client.Reader, stack *v1alpha1.Stack) ([]policy.Policy, error) {
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
	return out, nil
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
