package stack

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readyWrite matches a write of Ready, Reconciling or Stalled: a
// conditions helper given one of them, the helpers that set them by name, or
// a condition literal of that type.
var readyWrite = regexp.MustCompile(
	`conditions\.(Mark\w*|Set\w*|Delete|Remove\w*)\([^)]*(ReadyCondition|ReconcilingCondition|StalledCondition)` +
		`|conditions\.(MarkReconciling|MarkStalled)\(` +
		`|Type:\s*(v1alpha1|meta)\.(ReadyCondition|ReconcilingCondition|StalledCondition)`)

// otherKinds write the Ready condition of their own kinds (Alert, Receiver),
// not the Stack's.
var otherKinds = map[string]bool{"alert_controller.go": true, "receiver_controller.go": true}

// TestOneWriterOfReady: summarize.go alone writes the Stack's Ready,
// Reconciling and Stalled (steps record findings), and route.go alone looks
// at the decided action to choose the steps that run (no step skips itself).
func TestOneWriterOfReady(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	scanned := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		scanned++
		for i, line := range strings.Split(string(src), "\n") {
			if f != "summarize.go" && !otherKinds[f] && readyWrite.MatchString(line) {
				t.Errorf("%s:%d writes Ready, Reconciling or Stalled; record a finding for summarize.go instead: %s", f, i+1, strings.TrimSpace(line))
			}
			if f != "route.go" && strings.Contains(line, "decision.Action") {
				t.Errorf("%s:%d reads the decided action; only routes() chooses what runs: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if scanned < 10 {
		t.Fatalf("scanned %d files: not the package's folder?", scanned)
	}
}

// TestEveryActionIsRouted: every Action constant of decide.go has a route
// with at least one step, and there is no route for anything else.
func TestEveryActionIsRouted(t *testing.T) {
	actions := actionConstants(t)
	if len(actions) < 7 {
		t.Fatalf("found %d Action constants in decide.go: %v", len(actions), actions)
	}
	routes := (&StackReconciler{}).routes()
	for _, a := range actions {
		if len(routes[a]) == 0 {
			t.Errorf("action %q has no route (route.go)", a)
		}
	}
	for a := range routes {
		found := false
		for _, b := range actions {
			found = found || a == b
		}
		if !found {
			t.Errorf("route for %q, which is no Action constant", a)
		}
	}
}

// actionConstants are the values of the constants of type Action declared in
// decide.go, read from its source so that a new one cannot be forgotten here.
func actionConstants(t *testing.T) []Action {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "decide.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Action
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Action" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("Action constant with a value that is not a string literal")
				}
				out = append(out, Action(strings.Trim(lit.Value, `"`)))
			}
		}
	}
	return out
}
