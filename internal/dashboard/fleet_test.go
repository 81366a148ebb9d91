package dashboard

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestStatesOf(t *testing.T) {
	running := stackIn("ns", "run", "Ready=Unknown")
	running.Status.CurrentOperation = &v1alpha1.OperationRecord{Type: v1alpha1.OperationUp}
	plan := stackIn("ns", "plan", "Ready=False", "PlanPending=True")
	plan.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "p"}
	suspended := stackIn("ns", "sus", "Ready=False")
	suspended.Spec.Suspend = true
	for _, tc := range []struct {
		s    *v1alpha1.Stack
		want string
	}{
		{stackIn("ns", "ok", "Ready=True"), "[Ready]"},
		{stackIn("ns", "bad", "Ready=False"), "[Failing]"},
		{stackIn("ns", "drift", "Ready=True", "Drifted=True"), "[Ready Drifted]"},
		{plan, "[PlanPending]"},
		{suspended, "[Suspended]"},
		{running, "[Running]"},
	} {
		if got := fmt.Sprint(statesOf(tc.s)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.s.Name, got, tc.want)
		}
	}
}

func TestPageFiltersCountsSortsAndCuts(t *testing.T) {
	var stacks []*v1alpha1.Stack
	for i := range 120 {
		ready := "Ready=True"
		if i%10 == 0 {
			ready = "Ready=False"
		}
		ns := []string{"net", "db"}[i%2]
		stacks = append(stacks, stackIn(ns, fmt.Sprintf("stack-%03d", i), ready))
	}
	f := page(stacks, Query{})
	if f.Total != 120 || len(f.Rows) != 50 || f.Rows[0].Name != "stack-000" || f.Counts[StateFailing] != 12 || f.Counts[StateReady] != 108 {
		t.Fatalf("all: total %d, %d rows, first %s, counts %v", f.Total, len(f.Rows), f.Rows[0].Name, f.Counts)
	}
	f = page(stacks, Query{State: StateFailing, Sort: "-name", PageSize: 5, Page: 2})
	if f.Total != 12 || fmt.Sprint(names(f)) != "[net/stack-060 net/stack-050 net/stack-040 net/stack-030 net/stack-020]" {
		t.Fatalf("failing, by name reversed, page 2 of 5: total %d, %v", f.Total, names(f))
	}
	if f.Counts[StateReady] != 108 {
		t.Fatalf("the counts ignore the state filter, so that each shows what clicking it gives: %v", f.Counts)
	}
	sel, _ := labels.Parse("team=db")
	f = page(stacks, Query{Selector: sel, Name: "STACK-01"})
	if fmt.Sprint(names(f)) != "[db/stack-011 db/stack-013 db/stack-015 db/stack-017 db/stack-019]" {
		t.Fatalf("label and name: %v", names(f))
	}
	f = page(stacks, Query{Sort: "state", PageSize: 1})
	if f.Rows[0].States[0] != StateFailing {
		t.Fatalf("by state, what needs a person first: %v", f.Rows[0])
	}
	if f = page(stacks, Query{Page: 99}); len(f.Rows) != 0 || f.Total != 120 {
		t.Fatalf("past the end: %d rows", len(f.Rows))
	}
}
