package preview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/runner"
)

func urn(name string) string {
	return "urn:pulumi:dev::proj::kubernetes:core/v1:ConfigMap::" + name
}

func TestComment(t *testing.T) {
	res := &runner.Result{Outcome: runner.OutcomeSucceeded,
		Changes: runner.ChangeCounts{Create: 1, Update: 1, Replace: 1, Delete: 1},
		Resources: []runner.ResourceChange{
			{URN: urn("new"), Type: "kubernetes:core/v1:ConfigMap", Op: "create"},
			{URN: urn("settings"), Type: "kubernetes:core/v1:ConfigMap", Op: "update", Paths: []string{"data.color", `metadata.annotations["a/b"]`}},
			{URN: urn("db"), Type: "kubernetes:core/v1:ConfigMap", Op: "replace", Paths: []string{"metadata.name"}},
			{URN: urn("old"), Type: "kubernetes:core/v1:ConfigMap", Op: "delete"},
		},
		Policy: []runner.PolicyFinding{{Policy: "StackPolicy/ns/p/rule", Enforcement: "advisory", URN: urn("db"), Message: "db is\nreplaced"}},
	}
	r := Report{Namespace: "ns", Name: "web", Head: strings.Repeat("a", 40), Result: res, LogsHint: "stackpilot logs web -n ns --operation preview-1"}
	c := r.Comment(65535)
	for _, want := range []string{
		Marker("ns", "web"), "`aaaaaaaaaaaa`", "1 to create, 1 to update, 1 to replace, 1 to delete",
		"**Replaced** (deleted and created again): `db`", "**Deleted**: `old`",
		"| `~` update | `settings` | `kubernetes:core/v1:ConfigMap` | `data.color`, `metadata.annotations[\"a/b\"]` |",
		"advisory `StackPolicy/ns/p/rule` on `db`: db is replaced", "stackpilot logs web -n ns --operation preview-1",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q:\n%s", want, c)
		}
	}
	if d := r.Description(); d != "preview: 1 to create, 1 to update, 1 to replace, 1 to delete" {
		t.Errorf("Description = %q", d)
	}
}

// TestCommentWithinLimit: a plan too long for the forge is cut to fit,
// saying how many resources are left out; the marker stays.
func TestCommentWithinLimit(t *testing.T) {
	res := &runner.Result{Outcome: runner.OutcomeSucceeded, Changes: runner.ChangeCounts{Update: 5000}}
	for i := range 5000 {
		res.Resources = append(res.Resources, runner.ResourceChange{URN: urn(fmt.Sprintf("cm-%04d", i)), Type: "kubernetes:core/v1:ConfigMap", Op: "update", Paths: []string{"data.x"}})
	}
	r := Report{Namespace: "ns", Name: "web", Head: "abc", Result: res}
	for _, max := range []int{32768, 65535} {
		c := r.Comment(max)
		if n := len([]rune(c)); n > max {
			t.Fatalf("%d characters, over %d", n, max)
		}
		if !strings.HasPrefix(c, Marker("ns", "web")) || !strings.Contains(c, "more resources") {
			t.Fatalf("cut comment lacks the marker or the note:\n%s", c[len(c)-300:])
		}
	}
}

func TestFailedReport(t *testing.T) {
	r := Report{Namespace: "ns", Name: "web", Head: "abc",
		Result:  &runner.Result{Outcome: runner.OutcomeFailed},
		Message: "error: Duplicate resource\n  on line 3\n```injected"}
	if d := r.Description(); d != "error: Duplicate resource" {
		t.Errorf("Description = %q", d)
	}
	c := r.Comment(65535)
	if !strings.Contains(c, "failed") || strings.Count(c, "```") != 2 {
		t.Errorf("comment:\n%s", c)
	}
}

// TestPlanURL: --preview-plan-url-template's placeholders are filled,
// escaped; the comment links the plan when there is a URL, else names the
// command.
func TestPlanURL(t *testing.T) {
	got := PlanURL("https://dash.example/plans/{namespace}/{name}/{id}", "infra", "web app", "review-1-abc")
	if got != "https://dash.example/plans/infra/web%20app/review-1-abc" {
		t.Fatalf("PlanURL = %q", got)
	}
	if PlanURL("", "infra", "web", "id") != "" || PlanURL("https://x/{id}", "infra", "web", "") != "" {
		t.Fatal("a URL without a template or a plan")
	}
	r := Report{Namespace: "infra", Name: "web", Head: "abc", Result: &runner.Result{Outcome: runner.OutcomeSucceeded}, PlanID: "review-1-abc"}
	if c := r.Comment(65535); !strings.Contains(c, "`stackpilot plan web -n infra --id review-1-abc`") {
		t.Fatalf("no URL: the command\n%s", c)
	}
	r.PlanURL = "https://dash.example/p"
	if c := r.Comment(65535); !strings.Contains(c, "[the full plan](https://dash.example/p)") {
		t.Fatalf("with a URL: the link\n%s", c)
	}
}
