package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestWriteApprovalRace writes approvals from a Stack read before the
// controller wrote it again, against a real API server: the patch carries
// the resourceVersion read, so a plan replaced meanwhile is never approved,
// and a status write that left the plan pending is retried over.
func TestWriteApprovalRace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pinned control plane (make tools)")
	}
	env, err := testenv.Start(testenv.Options{Scheme: kubeScheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	ns := env.Namespace(t)
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	s.Spec.Source.Git = &v1alpha1.GitSource{URL: "https://git.example/infra.git", Ref: &v1alpha1.GitRef{Branch: "main"}}
	s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	setPending := func(id string, conds ...metav1.Condition) {
		t.Helper()
		cur := &v1alpha1.Stack{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.PendingPlan = &v1alpha1.PendingPlan{ID: id, Revision: "main@sha1:" + id, InputsDigest: "sha256:i", CreatedAt: metav1.Now()}
		cur.Status.Conditions = conds
		if err := env.Client.Status().Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *v1alpha1.Stack {
		t.Helper()
		cur := &v1alpha1.Stack{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	g := &stackGetter{cl: env.Client, ns: ns}
	c := &cli{}

	// The plan read is replaced before the patch: refused, nothing written.
	setPending("p1")
	stale := read()
	setPending("p2")
	_, err = c.writeApproval(ctx, g, stale, "p1")
	if err == nil || !strings.Contains(err.Error(), "the Stack changed while approving: plan p1 is not the pending plan (p2 is") {
		t.Fatalf("approving a replaced plan: %v", err)
	}
	if got := read().Annotations[v1alpha1.ApproveAnnotation]; got != "" {
		t.Fatalf("the replaced plan was approved: annotation %q", got)
	}

	// The status changed but p2 is still pending: written on the next try.
	stale = read()
	setPending("p2", metav1.Condition{Type: v1alpha1.PlanPendingCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.AwaitingApprovalReason, Message: "p2", LastTransitionTime: metav1.Now()})
	if _, err := c.writeApproval(ctx, g, stale, "p2"); err != nil {
		t.Fatalf("approving the plan still pending: %v", err)
	}
	if got := read().Annotations[v1alpha1.ApproveAnnotation]; got != "p2" {
		t.Fatalf("annotation %q, want p2", got)
	}
}
