package dashboard

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func manualStack(ns, name, plan string) *v1alpha1.Stack {
	s := stackIn(ns, name, "Ready=False", "PlanPending=True")
	s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
	s.Status.PendingPlan = &v1alpha1.PendingPlan{ID: plan, Revision: "main@sha1:1", CreatedAt: metav1.Now()}
	return s
}

// TestApproveApprovesExactlyThePlanShown: the page's plan id is approved
// only while it is the pending plan; a caller who may not patch the Stack
// is refused and nothing is written.
func TestApproveApprovesExactlyThePlanShown(t *testing.T) {
	cl, _ := fakeCluster(t, manualStack("team-a", "net", "plan-2"), manualStack("team-b", "shared", "plan-9"))
	h := NewServer(cl, cl, cl).Handler()
	alice := []string{"Authorization", "Bearer alice-token"}
	annotation := func(ns, name string) string {
		var s v1alpha1.Stack
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		return s.Annotations[v1alpha1.ApproveAnnotation]
	}

	rec := do(t, h, "POST", "/api/stacks/team-a/net/approve", `{"plan":"plan-1"}`, alice...)
	if rec.Code != 409 || !strings.Contains(rec.Body.String(), "plan-2 replaced it") {
		t.Fatalf("a stale plan: %d %s", rec.Code, rec.Body)
	}
	if got := annotation("team-a", "net"); got != "" {
		t.Fatalf("a stale approval wrote %q", got)
	}
	if rec := do(t, h, "POST", "/api/stacks/team-a/net/approve", `{}`, alice...); rec.Code != 400 {
		t.Fatalf("no plan id: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, h, "POST", "/api/stacks/team-a/net/approve", `{"plan":"plan-2"}`, alice...)
	if rec.Code != 200 {
		t.Fatalf("approve: %d %s", rec.Code, rec.Body)
	}
	if got := annotation("team-a", "net"); got != "plan-2" {
		t.Fatalf("approved %q, want plan-2", got)
	}

	// alice may get team-b/shared, not patch it.
	rec = do(t, h, "POST", "/api/stacks/team-b/shared/approve", `{"plan":"plan-9"}`, alice...)
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), "may not patch") {
		t.Fatalf("no patch right: %d %s", rec.Code, rec.Body)
	}
	if got := annotation("team-b", "shared"); got != "" {
		t.Fatalf("a refused approval wrote %q", got)
	}
	if rec := do(t, h, "POST", "/api/stacks/team-a/net/destroy", "", alice...); rec.Code != 404 {
		t.Fatalf("an unknown action: %d %s", rec.Code, rec.Body)
	}
}

// TestSteeringActions: suspend, resume, reconcile and check-drift write the
// CLI's patches.
func TestSteeringActions(t *testing.T) {
	cl, _ := fakeCluster(t, stackIn("team-a", "net", "Ready=True"))
	h := NewServer(cl, cl, cl).Handler()
	alice := []string{"Authorization", "Bearer alice-token"}
	get := func() *v1alpha1.Stack {
		var s v1alpha1.Stack
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "net"}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	for _, a := range []string{"suspend", "check-drift"} {
		if rec := do(t, h, "POST", "/api/stacks/team-a/net/"+a, "", alice...); rec.Code != 200 {
			t.Fatalf("%s: %d %s", a, rec.Code, rec.Body)
		}
	}
	s := get()
	if !s.Spec.Suspend || !strings.HasPrefix(s.Annotations[v1alpha1.ReconcileRequestAnnotation], v1alpha1.DriftCheckRequestPrefix) {
		t.Fatalf("after suspend and check-drift: suspend %v, annotations %v", s.Spec.Suspend, s.Annotations)
	}
	if rec := do(t, h, "POST", "/api/stacks/team-a/net/resume", "", alice...); rec.Code != 200 {
		t.Fatalf("resume: %d %s", rec.Code, rec.Body)
	}
	s = get()
	if s.Spec.Suspend || strings.HasPrefix(s.Annotations[v1alpha1.ReconcileRequestAnnotation], v1alpha1.DriftCheckRequestPrefix) {
		t.Fatalf("after resume: suspend %v, annotations %v", s.Spec.Suspend, s.Annotations)
	}
}
