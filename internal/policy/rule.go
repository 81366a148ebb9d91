// Package policy compiles and evaluates Stackpilot's policy rules: CEL
// expressions over one resource Pulumi is about to create, update, replace
// or delete, and the Stack it belongs to. It is pure logic: the analyzer the
// runner hands to `pulumi --policy-pack`, the controller (which compiles a
// policy when it changes, to report a broken rule) and `stackpilot policy
// test` all use it, so that a rule means the same wherever it runs.
package policy

import "fmt"

// Enforcement says what a rule's violation does.
type Enforcement string

const (
	// Mandatory: a violation stops the operation before the resource
	// changes.
	Mandatory Enforcement = "mandatory"
	// Advisory: a violation is reported (an event, the Stack's status) and
	// the operation goes on.
	Advisory Enforcement = "advisory"
	// Disabled: the rule is compiled (so a broken one is still reported)
	// but never evaluated.
	Disabled Enforcement = "disabled"
)

// Operation is what Pulumi is about to do to a resource.
type Operation string

const (
	Create  Operation = "create"
	Update  Operation = "update"
	Replace Operation = "replace"
	Delete  Operation = "delete"
)

// Operations are the valid operations, in the order the documentation
// lists them.
var Operations = []Operation{Create, Update, Replace, Delete}

// Rule is one rule of a policy, as the API has it.
type Rule struct {
	// Name identifies the rule within its policy.
	Name string `json:"name"`
	// Enforcement is mandatory, advisory or disabled.
	Enforcement Enforcement `json:"enforcement,omitempty"`
	// Match chooses the resources the rule applies to; empty matches all.
	Match Match `json:"match,omitzero"`
	// Expression is CEL that must evaluate to true for the resource to
	// comply, over `resource` and `stack`.
	Expression string `json:"expression"`
	// Message is the text of a violation. MessageExpression, when set, is
	// CEL evaluating to that text instead (secret inputs read "[secret]"
	// there); when both are empty the message names the rule.
	Message           string `json:"message,omitempty"`
	MessageExpression string `json:"messageExpression,omitempty"`
}

// Match chooses resources by type token, operation and name. Each list that
// is empty matches everything; types and names are globs where `*` stands
// for any run of characters (`/` and `:` included) and `?` for one.
type Match struct {
	Types      []string    `json:"types,omitempty"`
	Operations []Operation `json:"operations,omitempty"`
	Names      []string    `json:"names,omitempty"`
}

// Policy is a named list of rules: a StackPolicy or ClusterStackPolicy.
type Policy struct {
	// Kind is StackPolicy or ClusterStackPolicy; Namespace is empty for
	// the latter. Both only name the policy in findings and errors.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Rules     []Rule `json:"rules"`
}

// ID names the policy as findings and metrics do: <namespace>/<name> for a
// StackPolicy, <name> for a ClusterStackPolicy.
func (p Policy) ID() string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

func (p Policy) String() string { return fmt.Sprintf("%s %s", p.Kind, p.ID()) }

// RuleName names one of the policy's rules in findings, Pulumi's output
// and metrics: <kind>/<policy ID>/<rule>.
func (p Policy) RuleName(rule string) string {
	return p.Kind + "/" + p.ID() + "/" + rule
}

// NeedsPlan says whether an enabled rule of policies lists replace or
// delete: those are known only from an update plan (see PlanChanges), so
// the operations that apply such rules make one first.
func NeedsPlan(policies []Policy) bool {
	for _, p := range policies {
		for _, r := range p.Rules {
			if r.Enforcement == Disabled {
				continue
			}
			for _, op := range r.Match.Operations {
				if op == Replace || op == Delete {
					return true
				}
			}
		}
	}
	return false
}

// ListsOperation says whether r applies to op by listing it (a rule that
// lists no operation applies to every operation but delete).
func (r Rule) ListsOperation(op Operation) bool {
	if len(r.Match.Operations) == 0 {
		return op != Delete
	}
	for _, o := range r.Match.Operations {
		if o == op {
			return true
		}
	}
	return false
}
