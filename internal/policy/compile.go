package policy

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"google.golang.org/protobuf/types/known/structpb"
)

// Resource is one resource Pulumi is about to change, what a rule sees as
// `resource`. Inputs, OldInputs (empty for a create) and the provider's
// inputs are JSON-like values (maps, lists, strings, numbers, booleans,
// nil) that may hold Unknown (a value Pulumi computes later, during a
// preview) and Secret.
type Resource struct {
	Type, Name, URN string
	Op              string // an Operation
	Inputs          map[string]any
	OldInputs       map[string]any
	Provider        Provider
}

// Provider is the provider resource that will carry out the change.
type Provider struct {
	Type, Name, URN string
	Inputs          map[string]any
}

// Stack is what a rule sees as `stack`: the Stack being applied.
type Stack struct {
	Namespace string            `cel:"namespace" json:"namespace"`
	Name      string            `cel:"name" json:"name"`
	Labels    map[string]string `cel:"labels" json:"labels,omitempty"`
}

// celResource and celProvider are Resource and Provider as CEL reads them:
// a declared type, so that `resource.nme` fails when the rule is compiled,
// with inputs of JSON values, which CEL types dyn.
type celResource struct {
	Type      string                     `cel:"type"`
	Name      string                     `cel:"name"`
	URN       string                     `cel:"urn"`
	Op        string                     `cel:"op"`
	Inputs    map[string]*structpb.Value `cel:"inputs"`
	OldInputs map[string]*structpb.Value `cel:"oldInputs"`
	Provider  celProvider                `cel:"provider"`
}

type celProvider struct {
	Type   string                     `cel:"type"`
	Name   string                     `cel:"name"`
	URN    string                     `cel:"urn"`
	Inputs map[string]*structpb.Value `cel:"inputs"`
}

// Limits on what a rule may be. An expression is bounded in size and
// nesting when it is compiled, and in cost when it runs (see evaluate.go):
// CEL has no unbounded loop, but nested comprehensions over large inputs
// can cost as much as one.
const (
	maxRules            = 256
	maxRuleNameLength   = 128
	maxExpressionLength = 10000 // code points
	maxNestingDepth     = 50
	maxPatterns         = 64
)

var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(types.ParseStructTags(true),
			reflect.TypeFor[celResource](), reflect.TypeFor[celProvider](), reflect.TypeFor[Stack]()),
		cel.Variable("resource", cel.ObjectType("policy.celResource")),
		cel.Variable("stack", cel.ObjectType("policy.Stack")),
		// Inputs come from JSON: a number is a double, and a rule saying
		// `resource.inputs.replicas > 3` means the number.
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
		cel.OptionalTypes(),
		cel.ParserRecursionLimit(maxNestingDepth),
		cel.ParserExpressionSizeLimit(maxExpressionLength),
	)
})

// Compiled is a policy whose every rule compiled and type-checked.
type Compiled struct {
	Policy Policy
	rules  []compiledRule
}

type compiledRule struct {
	Rule
	types, names []glob
	ops          []Operation
	expr         cel.Program
	message      cel.Program // nil without MessageExpression
}

// RuleError is one thing wrong with one rule: which field, and for an
// expression where (1-based line and column; 0 when not about a position).
type RuleError struct {
	Rule    string // its name, or "#<index>" when it has none
	Field   string // e.g. "expression", "match.types[2]"
	Line    int
	Column  int
	Message string
}

func (e RuleError) Error() string {
	at := ""
	if e.Line > 0 {
		at = fmt.Sprintf(" (line %d, column %d)", e.Line, e.Column)
	}
	return fmt.Sprintf("rule %s: %s%s: %s", e.Rule, e.Field, at, e.Message)
}

// CompileError lists everything wrong with a policy; nothing of it applies.
type CompileError struct {
	Policy Policy
	Errors []RuleError
}

func (e *CompileError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, r := range e.Errors {
		msgs[i] = r.Error()
	}
	return fmt.Sprintf("%s: %s", e.Policy, strings.Join(msgs, "; "))
}

// Compile checks and compiles every rule of p. It returns a *CompileError
// naming each broken rule, the field and the position in the expression;
// then no rule of p is usable, so that a policy never half applies.
func Compile(p Policy) (*Compiled, error) {
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	c := &Compiled{Policy: p}
	var errs []RuleError
	if len(p.Rules) > maxRules {
		errs = append(errs, RuleError{Rule: "*", Field: "rules", Message: fmt.Sprintf("%d rules, at most %d", len(p.Rules), maxRules)})
	}
	seen := map[string]bool{}
	for i, r := range p.Rules {
		cr, ruleErrs := compileRule(env, i, r)
		if r.Name != "" && seen[r.Name] {
			ruleErrs = append(ruleErrs, RuleError{Rule: r.Name, Field: "name", Message: "another rule of the policy has this name"})
		}
		seen[r.Name] = true
		errs = append(errs, ruleErrs...)
		c.rules = append(c.rules, cr)
	}
	if len(errs) > 0 {
		return nil, &CompileError{Policy: p, Errors: errs}
	}
	return c, nil
}

func compileRule(env *cel.Env, index int, r Rule) (compiledRule, []RuleError) {
	cr := compiledRule{Rule: r}
	id := r.Name
	if id == "" {
		id = fmt.Sprintf("#%d", index)
	}
	var errs []RuleError
	fail := func(field, format string, args ...any) {
		errs = append(errs, RuleError{Rule: id, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case r.Name == "":
		fail("name", "a rule needs a name")
	case len(r.Name) > maxRuleNameLength:
		fail("name", "longer than %d characters", maxRuleNameLength)
	}
	switch r.Enforcement {
	case "":
		cr.Enforcement = Mandatory
	case Mandatory, Advisory, Disabled:
	default:
		fail("enforcement", "%q: want mandatory, advisory or disabled", r.Enforcement)
	}
	for _, list := range []struct {
		field    string
		patterns []string
		into     *[]glob
	}{{"match.types", r.Match.Types, &cr.types}, {"match.names", r.Match.Names, &cr.names}} {
		if len(list.patterns) > maxPatterns {
			fail(list.field, "%d patterns, at most %d", len(list.patterns), maxPatterns)
			continue
		}
		for i, p := range list.patterns {
			g, err := compileGlob(p)
			if err != nil {
				fail(fmt.Sprintf("%s[%d]", list.field, i), "%v", err)
				continue
			}
			*list.into = append(*list.into, g)
		}
	}
	for i, op := range r.Match.Operations {
		if !slices.Contains(Operations, op) {
			fail(fmt.Sprintf("match.operations[%d]", i), "%q: want create, update, replace or delete", op)
		}
		cr.ops = append(cr.ops, op)
	}
	if strings.TrimSpace(r.Expression) == "" {
		fail("expression", "a rule needs an expression that is true when the resource complies")
	} else if prg, err := compileExpr(env, r.Expression, types.BoolType); err != nil {
		errs = append(errs, exprErrors(id, "expression", err)...)
	} else {
		cr.expr = prg
	}
	if r.MessageExpression != "" {
		if prg, err := compileExpr(env, r.MessageExpression, types.StringType); err != nil {
			errs = append(errs, exprErrors(id, "messageExpression", err)...)
		} else {
			cr.message = prg
		}
	}
	return cr, errs
}

// exprError is a compile error of one expression: CEL's issues, or a whole
// expression of the wrong type.
type exprError struct {
	issues *cel.Issues
	msg    string
}

func (e *exprError) Error() string {
	if e.issues != nil {
		return e.issues.String()
	}
	return e.msg
}

func compileExpr(env *cel.Env, expr string, want *types.Type) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, &exprError{issues: iss}
	}
	// dyn (e.g. an input read as is) is checked when it runs.
	if out := ast.OutputType(); !out.IsAssignableType(want) && out != types.DynType {
		return nil, &exprError{msg: fmt.Sprintf("evaluates to %s, want %s", out, want)}
	}
	return env.Program(ast,
		cel.EvalOptions(cel.OptPartialEval),
		cel.CostLimit(costLimit),
		cel.InterruptCheckFrequency(interruptEvery))
}

func exprErrors(rule, field string, err error) []RuleError {
	var ee *exprError
	if !errors.As(err, &ee) {
		return []RuleError{{Rule: rule, Field: field, Message: err.Error()}}
	}
	if ee.issues == nil {
		return []RuleError{{Rule: rule, Field: field, Message: ee.msg}}
	}
	var out []RuleError
	for _, e := range ee.issues.Errors() {
		re := RuleError{Rule: rule, Field: field, Message: e.Message}
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			re.Line, re.Column = loc.Line(), loc.Column()+1
		}
		out = append(out, re)
	}
	return out
}
