package dashboard

import (
	"fmt"
	"testing"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestGraphChainCycleAndCrossNamespace: a chain's edges, a cycle marked on
// both its edges, an edge to another namespace's Stack the caller cannot
// see (shown unknown), and a Stack without edges counted, not drawn.
func TestGraphChainCycleAndCrossNamespace(t *testing.T) {
	net, db, app := stackIn("a", "net"), stackIn("a", "db"), stackIn("a", "app")
	db.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "net"}}
	app.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{Name: "db"}}}
	app.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "dns", Namespace: "shared"}}
	x, y, lone := stackIn("a", "x"), stackIn("a", "y"), stackIn("a", "lone")
	x.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "y"}}
	y.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "x"}}

	g := buildGraph([]*v1alpha1.Stack{net, db, app, x, y, lone})
	var edges []string
	for _, e := range g.Edges {
		edges = append(edges, fmt.Sprintf("%s>%s:%s cross=%v cycle=%v", e.From, e.To, e.Kind, e.CrossNamespace, e.InCycle))
	}
	want := "[a/app>a/db:stackOutputs cross=false cycle=false a/app>shared/dns:dependsOn cross=true cycle=false a/db>a/net:dependsOn cross=false cycle=false a/x>a/y:dependsOn cross=false cycle=true a/y>a/x:dependsOn cross=false cycle=true]"
	if got := fmt.Sprint(edges); got != want {
		t.Fatalf("edges\n got %s\nwant %s", got, want)
	}
	if fmt.Sprint(g.Cycles) != "[[a/x a/y]]" || g.Unlinked != 1 || len(g.Nodes) != 6 {
		t.Fatalf("cycles %v, unlinked %d, nodes %d", g.Cycles, g.Unlinked, len(g.Nodes))
	}
	for _, n := range g.Nodes {
		if n.Known != (n.ID != "shared/dns") {
			t.Fatalf("node %s known=%v", n.ID, n.Known)
		}
	}
}

// TestBlastGroupsAPendingCommit: Stacks holding a plan of the same commit
// are one change, with their counts added; a pull request's previews
// another; unaffected ones are left out.
func TestBlastGroupsAPendingCommit(t *testing.T) {
	a, b, c := manualStack("t", "a", "p1"), manualStack("t", "b", "p2"), stackIn("t", "c")
	for _, s := range []*v1alpha1.Stack{a, b, c} {
		s.Spec.Source.Git = &v1alpha1.GitSource{URL: "https://token@git.example/infra.git"}
	}
	a.Status.PendingPlan.Changes = v1alpha1.ChangeSummary{Create: 2}
	b.Status.PendingPlan.Changes = v1alpha1.ChangeSummary{Update: 1}
	c.Status.Previews = []v1alpha1.PullRequestPreview{{Number: 7, Head: "abc", Phase: v1alpha1.PreviewSucceeded, Changes: &v1alpha1.ChangeSummary{Delete: 1}}}
	b.Status.Previews = []v1alpha1.PullRequestPreview{{Number: 7, Head: "abc", Phase: v1alpha1.PreviewUnaffected}}
	groups := buildBlast([]*v1alpha1.Stack{a, b, c})
	if len(groups) != 2 {
		t.Fatalf("groups %+v", groups)
	}
	commit := groups[0]
	if commit.Kind != "commit" || len(commit.Stacks) != 2 || commit.Totals.Create != 2 || commit.Totals.Update != 1 || commit.Source != "https://git.example/infra.git" {
		t.Fatalf("commit group %+v", commit)
	}
	pr := groups[1]
	if pr.Kind != "pullRequest" || pr.Number != 7 || len(pr.Stacks) != 1 || pr.Stacks[0].Name != "c" {
		t.Fatalf("pull request group %+v", pr)
	}
}
