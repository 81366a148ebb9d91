package policy

import (
	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/policy"
)

// Kinds as findings, events and metrics name them.
const (
	KindStackPolicy        = "StackPolicy"
	KindClusterStackPolicy = "ClusterStackPolicy"
)

// fromAPI is a policy's rules as internal/policy compiles them.
func fromAPI(kind, namespace, name string, rules []v1alpha1.PolicyRule) policy.Policy {
	p := policy.Policy{Kind: kind, Namespace: namespace, Name: name}
	for _, r := range rules {
		rule := policy.Rule{Name: r.Name, Enforcement: policy.Enforcement(r.Enforcement),
			Match:      policy.Match{Types: r.Match.Types, Names: r.Match.Names},
			Expression: r.Expression, Message: r.Message, MessageExpression: r.MessageExpression}
		for _, op := range r.Match.Operations {
			rule.Match.Operations = append(rule.Match.Operations, policy.Operation(op))
		}
		p.Rules = append(p.Rules, rule)
	}
	return p
}

// StackPolicy is p as internal/policy reads it.
func StackPolicy(p *v1alpha1.StackPolicy) policy.Policy {
	return fromAPI(KindStackPolicy, p.Namespace, p.Name, p.Spec.Rules)
}

// ClusterStackPolicy is p as internal/policy reads it.
func ClusterStackPolicy(p *v1alpha1.ClusterStackPolicy) policy.Policy {
	return fromAPI(KindClusterStackPolicy, "", p.Name, p.Spec.Rules)
}
