package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustCompile(t *testing.T, rules ...Rule) *Compiled {
	t.Helper()
	c, err := Compile(Policy{Kind: "StackPolicy", Namespace: "team-a", Name: "guardrails", Rules: rules})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

func bucket(op string, inputs map[string]any) Resource {
	return Resource{Type: "aws:s3/bucket:Bucket", Name: "logs", URN: "urn:pulumi:dev::app::aws:s3/bucket:Bucket::logs", Op: op, Inputs: inputs}
}

var stack = Stack{Namespace: "team-a", Name: "app", Labels: map[string]string{"team": "a"}}

func TestCompileReportsEveryBrokenRuleWithItsPosition(t *testing.T) {
	_, err := Compile(Policy{Kind: "ClusterStackPolicy", Name: "org", Rules: []Rule{
		{Name: "syntax", Expression: "resource.inputs.acl == "},
		{Name: "typo", Expression: "resource.nme == 'x'"},
		{Name: "not-bool", Expression: "resource.name"},
		{Name: "message-type", Expression: "true", MessageExpression: "1 + 2"},
		{Name: "enforcement", Enforcement: "warn", Expression: "true"},
		{Name: "ops", Expression: "true", Match: Match{Operations: []Operation{"import"}}},
		{Name: "globs", Expression: "true", Match: Match{Types: []string{""}}},
		{Name: "empty"},
		{Name: "fine", Expression: "true"},
		{Name: "fine", Expression: "true"},
		{Expression: "true"},
	}})
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *CompileError, got %v", err)
	}
	byRule := map[string][]RuleError{}
	for _, e := range ce.Errors {
		byRule[e.Rule] = append(byRule[e.Rule], e)
	}
	for _, want := range []struct{ rule, field, text string }{
		{"syntax", "expression", "mismatched input"},
		{"typo", "expression", "nme"},
		{"not-bool", "expression", "want bool"},
		{"message-type", "messageExpression", "want string"},
		{"enforcement", "enforcement", "want mandatory, advisory or disabled"},
		{"ops", "match.operations[0]", "import"},
		{"globs", "match.types[0]", "empty pattern"},
		{"empty", "expression", "needs an expression"},
		{"fine", "name", "another rule"},
		{"#10", "name", "needs a name"},
	} {
		found := false
		for _, e := range byRule[want.rule] {
			if e.Field == want.field && strings.Contains(e.Message, want.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("no error for rule %s field %s containing %q; got %v", want.rule, want.field, want.text, byRule[want.rule])
		}
	}
	// Positions: the syntax error is on line 1 past the '=='; the typo at
	// the field.
	for _, e := range byRule["syntax"] {
		if e.Line != 1 || e.Column < 20 {
			t.Errorf("syntax error at line %d column %d, want line 1 past column 20", e.Line, e.Column)
		}
	}
	if e := byRule["typo"][0]; e.Line != 1 || e.Column != 9 {
		t.Errorf("typo at line %d column %d, want 1:9", e.Line, e.Column)
	}
	if !strings.Contains(err.Error(), "ClusterStackPolicy org") || !strings.Contains(err.Error(), "rule typo: expression (line 1, column 9)") {
		t.Errorf("error text does not name the policy, rule and position: %v", err)
	}
}

func TestEvaluate(t *testing.T) {
	c := mustCompile(t,
		Rule{Name: "private-buckets", Match: Match{Types: []string{"aws:s3/*"}, Operations: []Operation{Create, Update}},
			Expression:        "!has(resource.inputs.acl) || resource.inputs.acl == 'private'",
			MessageExpression: "'bucket ' + resource.name + ' would be ' + resource.inputs.acl"},
		Rule{Name: "owner-tag", Enforcement: Advisory,
			Expression: "has(resource.inputs.tags) && 'owner' in resource.inputs.tags",
			Message:    "tag every resource with its owner"},
		Rule{Name: "keep-logs", Match: Match{Operations: []Operation{Delete}, Names: []string{"log*"}},
			Expression: "false", Message: "the logs bucket is never deleted"},
		Rule{Name: "off", Enforcement: Disabled, Expression: "false"},
	)
	ctx := context.Background()
	tagged := map[string]any{"owner": "a"}
	for _, tc := range []struct {
		name string
		res  Resource
		want []string // rule:outcome:blocks
		msg  string   // in the first finding's message
	}{
		{"compliant", bucket("create", map[string]any{"acl": "private", "tags": tagged}), nil, ""},
		{"public create", bucket("create", map[string]any{"acl": "public-read", "tags": tagged}),
			[]string{"private-buckets:violated:true"}, "bucket logs would be public-read"},
		{"public replace is not matched", bucket("replace", map[string]any{"acl": "public-read", "tags": tagged}), nil, ""},
		{"advisory only", bucket("update", map[string]any{}), []string{"owner-tag:violated:false"}, "tag every resource"},
		{"delete by name", bucket("delete", map[string]any{"tags": tagged}), []string{"keep-logs:violated:true"}, "never deleted"},
		{"delete of another name", func() Resource { r := bucket("delete", map[string]any{"tags": tagged}); r.Name = "data"; return r }(), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Evaluate(ctx, stack, tc.res)
			var summary []string
			for _, f := range got {
				summary = append(summary, f.Rule+":"+string(f.Outcome)+":"+map[bool]string{true: "true", false: "false"}[f.Blocks()])
				if f.Policy != "team-a/guardrails" || f.PolicyKind != "StackPolicy" || f.URN != tc.res.URN {
					t.Errorf("finding does not name the policy and resource: %+v", f)
				}
			}
			if strings.Join(summary, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("findings %v, want %v (%v)", summary, tc.want, got)
			}
			if tc.msg != "" && !strings.Contains(got[0].Message, tc.msg) {
				t.Errorf("message %q, want it to contain %q", got[0].Message, tc.msg)
			}
		})
	}
}

func TestEvaluateFailuresAreFindingsNotPanics(t *testing.T) {
	ctx := context.Background()
	items := make([]any, 300)
	for i := range items {
		items[i] = float64(i)
	}
	for _, tc := range []struct {
		name, expr string
		inputs     map[string]any
		want       string
	}{
		{"missing input", "resource.inputs.acl == 'private'", map[string]any{}, "has(resource.inputs.acl)"},
		{"type error at run time", "resource.inputs.acl > 3", map[string]any{"acl": "private"}, "no such overload"},
		{"not a bool at run time", "resource.inputs.acl", map[string]any{"acl": "private"}, "want a bool"},
		{"too costly (what a loop would be)", "resource.inputs.items.all(a, resource.inputs.items.all(b, resource.inputs.items.all(c, a + b + c >= 0.0)))",
			map[string]any{"items": items}, "simplify it"},
		{"index out of range", "resource.inputs.l[5] == 1", map[string]any{"l": []any{1}}, "index out of bounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCompile(t, Rule{Name: "r", Expression: tc.expr})
			start := time.Now()
			got := c.Evaluate(ctx, stack, bucket("create", tc.inputs))
			if len(got) != 1 || got[0].Outcome != Failed || !got[0].Blocks() {
				t.Fatalf("want one blocking Failed finding, got %+v", got)
			}
			if !strings.Contains(got[0].Message, tc.want) {
				t.Errorf("message %q does not say %q", got[0].Message, tc.want)
			}
			t.Logf("%s: %s (%s)", tc.name, got[0].Message, time.Since(start))
		})
	}
}

func TestEvaluateStopsWhenTheContextEnds(t *testing.T) {
	items := make([]any, 2000)
	for i := range items {
		items[i] = float64(i)
	}
	c := mustCompile(t, Rule{Name: "slow", Expression: "resource.inputs.items.all(a, resource.inputs.items.exists(b, b == a))"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := c.Evaluate(ctx, stack, bucket("create", map[string]any{"items": items}))
	if len(got) != 1 || got[0].Outcome != Failed || !strings.Contains(got[0].Message, "ended before the rule did") {
		t.Fatalf("want a Failed finding saying the operation ended, got %+v", got)
	}
}

func TestUnknownInputsMakeARuleUndetermined(t *testing.T) {
	c := mustCompile(t,
		Rule{Name: "acl", Expression: "resource.inputs.acl == 'private'"},
		Rule{Name: "region", Expression: "resource.inputs.region == 'eu-west-1'"},
		Rule{Name: "first-rule", Expression: "resource.inputs.rules[0].allow == false"},
	)
	got := c.Evaluate(context.Background(), stack, bucket("create", map[string]any{
		"acl": Unknown{}, "region": "us-east-1",
		"rules": []any{map[string]any{"allow": Unknown{}}},
	}))
	outcomes := map[string]Outcome{}
	for _, f := range got {
		outcomes[f.Rule] = f.Outcome
		if f.Outcome == Undetermined && f.Blocks() {
			t.Errorf("an undetermined finding blocks: %+v", f)
		}
	}
	want := map[string]Outcome{"acl": Undetermined, "region": Violated, "first-rule": Undetermined}
	for rule, o := range want {
		if outcomes[rule] != o {
			t.Errorf("rule %s: %q, want %q (all: %+v)", rule, outcomes[rule], o, got)
		}
	}
}

func TestSecretsReachTheRuleButNeverAMessage(t *testing.T) {
	const password = "hunter22-not-for-logs"
	c := mustCompile(t,
		Rule{Name: "long-password", Expression: "resource.inputs.password.size() >= 32",
			MessageExpression: "'password ' + resource.inputs.password + ' is too short'"},
		// A conversion error quotes the value it could not convert.
		Rule{Name: "conversion", Expression: "timestamp(resource.inputs.password) > timestamp('2020-01-01T00:00:00Z')"},
		Rule{Name: "nested", Expression: "resource.inputs.conn.user == 'x'",
			MessageExpression: "'user ' + resource.inputs.conn.user"},
	)
	got := c.Evaluate(context.Background(), stack, bucket("create", map[string]any{
		"password": Secret{Value: password},
		"conn":     Secret{Value: map[string]any{"user": "admin-secret-user"}},
	}))
	if len(got) != 3 {
		t.Fatalf("want three findings, got %+v", got)
	}
	for _, f := range got {
		if strings.Contains(f.Message, password) || strings.Contains(f.Message, "admin-secret-user") {
			t.Errorf("rule %s leaks a secret: %q", f.Rule, f.Message)
		}
	}
	if got[0].Outcome != Violated || !strings.Contains(got[0].Message, "password [secret] is too short") {
		t.Errorf("the rule did not read the secret's value, or the message did not mask it: %+v", got[0])
	}
	if got[1].Outcome != Failed || !strings.Contains(got[1].Message, "[secret]") {
		t.Errorf("the conversion error should show the value masked (the CEL error quotes it): %+v", got[1])
	}
}

func TestRulesSeeStackAndOldInputs(t *testing.T) {
	c := mustCompile(t,
		Rule{Name: "team", Expression: "stack.labels['team'] == 'a' && stack.namespace == 'team-a' && stack.name == 'app'"},
		Rule{Name: "no-shrink", Match: Match{Operations: []Operation{Update}},
			Expression: "resource.inputs.size >= resource.oldInputs.size", Message: "volumes only grow"},
		Rule{Name: "replicas", Expression: "!has(resource.inputs.replicas) || resource.inputs.replicas <= 3"},
		Rule{Name: "provider", Expression: "resource.provider.inputs.region == 'eu-west-1'"},
	)
	r := bucket("update", map[string]any{"size": float64(10), "replicas": float64(5)})
	r.OldInputs = map[string]any{"size": float64(20)}
	r.Provider = Provider{Type: "pulumi:providers:aws", Name: "default", Inputs: map[string]any{"region": "eu-west-1"}}
	got := c.Evaluate(context.Background(), stack, r)
	var rules []string
	for _, f := range got {
		rules = append(rules, f.Rule+":"+string(f.Outcome))
	}
	if strings.Join(rules, ",") != "no-shrink:violated,replicas:violated" {
		t.Fatalf("findings %v, want no-shrink and replicas violated", rules)
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"aws:s3/*", "aws:s3/bucket:Bucket", true},
		{"aws:s3/*", "aws:s3control/x:Y", false},
		{"*:Bucket", "aws:s3/bucket:Bucket", true},
		{"kubernetes:core/v1:*", "kubernetes:core/v1:ConfigMap", true},
		{"log?", "logs", true},
		{"log?", "log", false},
		{"a.b", "axb", false},
		{"(x)+", "(x)+", true},
	} {
		g, err := compileGlob(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.match(tc.s); got != tc.want {
			t.Errorf("%q matches %q: %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// FuzzCompileAndEvaluate: no expression and no input panics the compiler or
// the evaluator, and what compiles evaluates within its bounds.
func FuzzCompileAndEvaluate(f *testing.F) {
	f.Add("resource.inputs.acl == 'private'", []byte(`{"acl":"public"}`))
	f.Add("resource.inputs.items.all(x, x > 1)", []byte(`{"items":[1,2,3]}`))
	f.Add("stack.labels.exists(k, k.startsWith('t'))", []byte(`{}`))
	f.Add("has(resource.inputs.a.b) && resource.inputs.a.b[0] == 1", []byte(`{"a":{"b":[1]}}`))
	f.Add("resource.inputs.s.matches('^[a-z]+$')", []byte(`{"s":"abc"}`))
	f.Add("[1,2,3].map(x, x * resource.inputs.n).sum() > 0", []byte(`{"n":2}`))
	f.Fuzz(func(t *testing.T, expr string, inputs []byte) {
		c, err := Compile(Policy{Kind: "StackPolicy", Name: "fuzz", Rules: []Rule{{Name: "r", Expression: expr, MessageExpression: "'m: ' + resource.name"}}})
		if err != nil {
			return
		}
		var in map[string]any
		if json.Unmarshal(inputs, &in) != nil {
			in = map[string]any{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, f := range c.Evaluate(ctx, stack, bucket("create", in)) {
			if f.Outcome == "" || len(f.Message) > maxMessageLength {
				t.Fatalf("bad finding %+v", f)
			}
		}
	})
}
