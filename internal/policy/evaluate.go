package policy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// costLimit bounds one evaluation, in CEL's cost units (about one per
	// step): a million is far beyond any sensible rule over one resource
	// and a few milliseconds of CPU.
	costLimit = 1_000_000
	// interruptEvery is how many comprehension steps pass between checks
	// of the context.
	interruptEvery = 100
	// maxMessageLength bounds a violation's message.
	maxMessageLength = 1024
	// masked stands for a secret value in messages.
	masked = "[secret]"
)

// Unknown marks an input Pulumi computes later (during a preview, an
// output of a resource not created yet). A rule whose verdict depends on
// it is Undetermined, not violated: the update evaluates it again with the
// value known.
type Unknown struct{}

// Secret marks a secret input. A rule's expression reads its value; a
// message reads "[secret]", and the value is cut out of any error.
type Secret struct{ Value any }

// Outcome is what one rule concluded about one resource, when it is not
// compliance.
type Outcome string

const (
	// Violated: the expression was false.
	Violated Outcome = "violated"
	// Failed: the expression could not be evaluated (a missing input, a
	// type error at run time, too costly). A mandatory rule that fails
	// blocks, as a violation does: a rule nobody can evaluate guards
	// nothing.
	Failed Outcome = "failed"
	// Undetermined: the verdict depends on a value not known yet.
	Undetermined Outcome = "undetermined"
)

// Finding is one rule's verdict on one resource that is not compliance.
type Finding struct {
	PolicyKind  string
	Policy      string // Policy.ID()
	Rule        string
	Enforcement Enforcement
	Outcome     Outcome
	URN         string
	Type        string
	Name        string
	Op          string
	// Message says what is wrong, without any secret value.
	Message string
}

// Blocks is true when the finding must stop the change: a mandatory rule
// violated or that could not be evaluated.
func (f Finding) Blocks() bool {
	return f.Enforcement == Mandatory && (f.Outcome == Violated || f.Outcome == Failed)
}

// Level is the enforcement a finding is reported with: mandatory when it
// stops the operation, else advisory (Pulumi knows no other; a disabled
// rule is never evaluated). An undetermined mandatory rule blocks outside a
// dry run (an update, where every input should be known): what cannot be
// checked there is not let through.
func (f Finding) Level(dryRun bool) Enforcement {
	if f.Blocks() || (f.Enforcement == Mandatory && f.Outcome == Undetermined && !dryRun) {
		return Mandatory
	}
	return Advisory
}

// Text is the finding's message as reported: the rule's message, after the
// outcome when that is not a plain violation.
func (f Finding) Text() string {
	if f.Outcome != Violated {
		return fmt.Sprintf("%s: %s", f.Outcome, f.Message)
	}
	return f.Message
}

func (f Finding) String() string {
	return fmt.Sprintf("%s %s rule %s (%s) %s %s: %s", f.PolicyKind, f.Policy, f.Rule, f.Enforcement, f.Outcome, f.URN, f.Message)
}

// Evaluate runs every enabled rule of c that matches r and returns what is
// not compliance, in rule order. It never panics on input: a rule that
// cannot be evaluated gives a Failed finding saying why.
func (c *Compiled) Evaluate(ctx context.Context, stack Stack, r Resource) []Finding {
	return c.evaluate(ctx, stack, r, false)
}

// EvaluateListed is Evaluate with only the rules that list r's operation in
// match.operations: those for replaces and deletes, which a plan is read for,
// while the rules that list no operation are applied by the analyzer.
func (c *Compiled) EvaluateListed(ctx context.Context, stack Stack, r Resource) []Finding {
	return c.evaluate(ctx, stack, r, true)
}

func (c *Compiled) evaluate(ctx context.Context, stack Stack, r Resource, listed bool) []Finding {
	var in *activation
	var out []Finding
	for i := range c.rules {
		rule := &c.rules[i]
		if rule.Enforcement == Disabled || !rule.matches(r) || (listed && len(rule.ops) == 0) {
			continue
		}
		if in == nil {
			in = newActivation(stack, r)
		}
		if f, ok := rule.evaluate(ctx, c.Policy, in, r); ok {
			out = append(out, f)
		}
	}
	return out
}

// matches says whether the rule applies to res. A rule that lists no
// operations applies to what the program declares (creates, updates,
// replaces, resources left as they are), not to deletes: a rule about
// inputs must not stop the removal of a resource, whose inputs are gone. A
// rule for deletes lists them.
func (r *compiledRule) matches(res Resource) bool {
	if len(r.ops) == 0 && res.Op == string(Delete) {
		return false
	}
	if len(r.ops) > 0 && !containsOp(r.ops, res.Op) {
		return false
	}
	return anyGlob(r.types, res.Type) && anyGlob(r.names, res.Name)
}

func containsOp(ops []Operation, op string) bool {
	for _, o := range ops {
		if string(o) == op {
			return true
		}
	}
	return false
}

func (r *compiledRule) evaluate(ctx context.Context, p Policy, in *activation, res Resource) (Finding, bool) {
	f := Finding{PolicyKind: p.Kind, Policy: p.ID(), Rule: r.Name, Enforcement: r.Enforcement,
		URN: res.URN, Type: res.Type, Name: res.Name, Op: res.Op}
	val, _, err := r.expr.ContextEval(ctx, in.vars)
	switch {
	case err != nil:
		f.Outcome, f.Message = Failed, in.redact(explain(err))
	case types.IsUnknown(val):
		f.Outcome = Undetermined
		f.Message = "depends on a value Pulumi computes later; the update checks it again"
	default:
		ok, isBool := val.Value().(bool)
		switch {
		case !isBool:
			f.Outcome = Failed
			f.Message = fmt.Sprintf("the expression gave %s, want a bool (true when the resource complies)", val.Type().TypeName())
		case ok:
			return Finding{}, false
		default:
			f.Outcome, f.Message = Violated, r.messageFor(ctx, in, res)
		}
	}
	return f, true
}

// messageFor is the violation's message: MessageExpression evaluated with
// secrets masked, else Message, else one naming the resource and the rule.
func (r *compiledRule) messageFor(ctx context.Context, in *activation, res Resource) string {
	fallback := r.Message
	if fallback == "" {
		fallback = fmt.Sprintf("%s (%s) does not comply with rule %s", res.Name, res.Type, r.Name)
	}
	if r.message == nil {
		return truncate(fallback)
	}
	val, _, err := r.message.ContextEval(ctx, in.masked)
	if err != nil {
		return truncate(fmt.Sprintf("%s (messageExpression failed: %s)", fallback, in.redact(explain(err))))
	}
	s, ok := val.Value().(string)
	if !ok || types.IsUnknown(val) {
		return truncate(fallback)
	}
	// The masked activation holds no secret; redact anyway, as a secret
	// may also be a plain input of the same resource.
	return truncate(in.redact(s))
}

// explain turns a CEL evaluation error into what to do about it.
func explain(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no such key"):
		return msg + " (an input the resource does not set: test for it first, e.g. has(resource.inputs.acl) && ...)"
	case strings.Contains(msg, "cost limit exceeded"):
		return fmt.Sprintf("%s: the rule needs more than %d evaluation steps for this resource; simplify it", msg, costLimit)
	case strings.Contains(msg, "no such overload"):
		return msg + " (an operator or function got operands of types it does not take, e.g. a string compared with a number: convert with int(), double() or string(), or test the type with type(x) == string)"
	case strings.Contains(msg, "interrupted"):
		return msg + ": the operation ended before the rule did"
	}
	return msg
}

func truncate(s string) string {
	if len(s) <= maxMessageLength {
		return s
	}
	cut := maxMessageLength - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// activation is one resource ready for CEL: vars with secrets unwrapped and
// unknown values declared as unknown attributes, masked the same with
// secrets shown as "[secret]" (for messages), and the secrets' text, longest
// first, to cut out of errors.
type activation struct {
	vars, masked cel.Activation
	secrets      []string
}

func newActivation(stack Stack, r Resource) *activation {
	w := &walker{}
	plain := celResource{Type: r.Type, Name: r.Name, URN: r.URN, Op: r.Op,
		Provider: celProvider{Type: r.Provider.Type, Name: r.Provider.Name, URN: r.Provider.URN}}
	mask := plain
	plain.Inputs, mask.Inputs = w.walkMap(r.Inputs, []any{"inputs"})
	plain.OldInputs, mask.OldInputs = w.walkMap(r.OldInputs, []any{"oldInputs"})
	plain.Provider.Inputs, mask.Provider.Inputs = w.walkMap(r.Provider.Inputs, []any{"provider", "inputs"})
	if stack.Labels == nil {
		stack.Labels = map[string]string{}
	}
	a := &activation{}
	var err error
	if a.vars, err = cel.PartialVars(map[string]any{"resource": plain, "stack": stack}, w.unknowns...); err != nil {
		// Only a malformed pattern fails, and walk builds them.
		panic(fmt.Sprintf("policy: partial activation: %v", err))
	}
	if a.masked, err = cel.PartialVars(map[string]any{"resource": mask, "stack": stack}, w.unknowns...); err != nil {
		panic(fmt.Sprintf("policy: partial activation: %v", err))
	}
	sort.Slice(w.secrets, func(i, j int) bool { return len(w.secrets[i]) > len(w.secrets[j]) })
	a.secrets = w.secrets
	return a
}

// redact cuts every secret's text out of s.
func (a *activation) redact(s string) string {
	for _, secret := range a.secrets {
		s = strings.ReplaceAll(s, secret, masked)
	}
	return s
}

// walker copies inputs twice (secrets unwrapped; secrets masked), noting
// where the unknown values are and the text of the secret ones.
type walker struct {
	unknowns []*cel.AttributePatternType
	secrets  []string
}

func (w *walker) walkMap(m map[string]any, path []any) (plain, mask map[string]*structpb.Value) {
	plain, mask = make(map[string]*structpb.Value, len(m)), make(map[string]*structpb.Value, len(m))
	for k, v := range m {
		p, m := w.walk(v, append(path[:len(path):len(path)], k), false)
		plain[k], mask[k] = jsonValue(p), jsonValue(m)
	}
	return plain, mask
}

// jsonValue is v as a JSON value; what is not JSON-like (it should not
// occur: inputs come from JSON) becomes its text.
func jsonValue(v any) *structpb.Value {
	if j, err := structpb.NewValue(v); err == nil {
		return j
	}
	return structpb.NewStringValue(fmt.Sprint(v))
}

func (w *walker) walk(v any, path []any, secret bool) (plain, mask any) {
	switch v := v.(type) {
	case Unknown:
		w.unknown(path)
		return nil, nil
	case Secret:
		p, _ := w.walk(v.Value, path, true)
		return p, masked
	case map[string]any:
		pm, mm := make(map[string]any, len(v)), make(map[string]any, len(v))
		for k, e := range v {
			pm[k], mm[k] = w.walk(e, append(path[:len(path):len(path)], k), secret)
		}
		if secret {
			return pm, masked
		}
		return pm, mm
	case []any:
		pl, ml := make([]any, len(v)), make([]any, len(v))
		for i, e := range v {
			pl[i], ml[i] = w.walk(e, append(path[:len(path):len(path)], int64(i)), secret)
		}
		if secret {
			return pl, masked
		}
		return pl, ml
	}
	if secret {
		if text := fmt.Sprint(v); len(text) >= 2 {
			w.secrets = append(w.secrets, text)
		}
		return v, masked
	}
	return v, v
}

func (w *walker) unknown(path []any) {
	p := cel.AttributePattern("resource")
	for _, q := range path {
		switch q := q.(type) {
		case string:
			p = p.QualString(q)
		case int64:
			p = p.QualInt(q)
		}
	}
	w.unknowns = append(w.unknowns, p)
}
