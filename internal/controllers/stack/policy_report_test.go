package stack

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// The report holds a result per finding (fail: mandatory, warn: advisory),
// errors and failures first, a pass per selecting policy that found
// nothing, and a summary that counts every finding, results beyond the
// bound included.
func TestPolicyReport(t *testing.T) {
	g := NewWithT(t)
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team-a", UID: "u-1"}}
	spec := &runner.PolicySpec{Policies: []policy.Policy{
		{Kind: "ClusterStackPolicy", Name: "org"},
		{Kind: "StackPolicy", Namespace: "team-a", Name: "tags"},
		{Kind: "StackPolicy", Namespace: "team-a", Name: "quiet"},
	}}
	res := &runner.Result{ID: "op-1", Type: runner.OpUp, Policy: []runner.PolicyFinding{
		{Policy: "StackPolicy/team-a/tags/owner", Enforcement: "advisory", URN: "urn:a", Message: "no owner"},
		{Policy: "ClusterStackPolicy/org/no-public", Enforcement: "mandatory", URN: "urn:b", Message: "public"},
	}}
	now := time.Unix(1700000000, 0)
	u := policyReport(stack, spec, res.ID, res, now)
	g.Expect(u.GetAPIVersion()).To(Equal("wgpolicyk8s.io/v1alpha2"))
	g.Expect(u.GetKind()).To(Equal("PolicyReport"))
	g.Expect(u.GetNamespace() + "/" + u.GetName()).To(Equal("team-a/stackpilot-stack-app"))
	g.Expect(u.GetOwnerReferences()).To(HaveLen(1))
	g.Expect(u.GetOwnerReferences()[0].UID).To(BeEquivalentTo("u-1"))
	g.Expect(results(u)).To(Equal([]string{
		"fail ClusterStackPolicy/org no-public urn:b public",
		"warn StackPolicy/team-a/tags owner urn:a no owner",
		"pass StackPolicy/team-a/quiet   no rule found anything in up op-1",
	}))
	summary, _, _ := unstructured.NestedMap(u.Object, "summary")
	g.Expect(summary).To(Equal(map[string]any{"pass": int64(1), "fail": int64(1), "warn": int64(1), "error": int64(0), "skip": int64(0)}))
	scope, _, _ := unstructured.NestedStringMap(u.Object, "scope")
	g.Expect(scope).To(Equal(map[string]string{"apiVersion": "stackpilot.dev/v1alpha1", "kind": "Stack", "namespace": "team-a", "name": "app", "uid": "u-1"}))
	// Plain JSON data (DeepCopy panics on anything else: an int, a []string).
	g.Expect(func() { u.DeepCopy() }).NotTo(Panic())

	// Many findings: the results are bounded, the summary is not.
	res.Policy = nil
	for i := range maxPolicyReportResults + 50 {
		res.Policy = append(res.Policy, runner.PolicyFinding{Policy: "StackPolicy/team-a/tags/owner", Enforcement: "mandatory", URN: fmt.Sprintf("urn:%d", i), Message: "no owner"})
	}
	u = policyReport(stack, spec, res.ID, res, now)
	g.Expect(results(u)).To(HaveLen(maxPolicyReportResults + 2)) // and the two passes
	summary, _, _ = unstructured.NestedMap(u.Object, "summary")
	g.Expect(summary["fail"]).To(Equal(int64(maxPolicyReportResults + 50)))

	// A policy that does not compile: one error result, no passes.
	res = &runner.Result{ID: "op-2", Type: runner.OpUp, ErrorClass: runner.ErrorPolicyInvalid,
		Message: "StackPolicy team-a/broken selects this Stack and does not compile: rule x: ..."}
	u = policyReport(stack, nil, res.ID, res, now)
	g.Expect(results(u)).To(Equal([]string{"error StackPolicy/team-a/broken   " + res.Message}))
}

func results(u *unstructured.Unstructured) []string {
	list, _, _ := unstructured.NestedSlice(u.Object, "results")
	var out []string
	for _, r := range list {
		m := r.(map[string]any)
		props, _ := m["properties"].(map[string]any)
		out = append(out, fmt.Sprintf("%v %v %v %v %v", m["result"], m["policy"], str(m["rule"]), str(props["urn"]), m["message"]))
	}
	return out
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// Only an attempt that a policy stopped counts: the newest finished one,
// drift checks and skips left out.
func TestStoppedByPolicy(t *testing.T) {
	finished := metav1.Now()
	rec := func(typ v1alpha1.OperationType, outcome v1alpha1.OperationOutcome, reason string) v1alpha1.OperationRecord {
		return v1alpha1.OperationRecord{Type: typ, Outcome: outcome, Reason: reason, FinishedAt: &finished}
	}
	for _, tc := range []struct {
		name    string
		history []v1alpha1.OperationRecord
		want    bool
	}{
		{"violation", []v1alpha1.OperationRecord{rec(v1alpha1.OperationUp, v1alpha1.OutcomeFailed, v1alpha1.PolicyViolationReason)}, true},
		{"invalid policy", []v1alpha1.OperationRecord{rec(v1alpha1.OperationPreview, v1alpha1.OutcomeFailed, v1alpha1.PolicyInvalidReason)}, true},
		{"a drift check after it", []v1alpha1.OperationRecord{
			rec(v1alpha1.OperationDriftCheck, v1alpha1.OutcomeSucceeded, ""),
			rec(v1alpha1.OperationUp, v1alpha1.OutcomeFailed, v1alpha1.PolicyViolationReason)}, true},
		{"another failure", []v1alpha1.OperationRecord{rec(v1alpha1.OperationUp, v1alpha1.OutcomeFailed, v1alpha1.OperationFailedReason)}, false},
		{"applied since", []v1alpha1.OperationRecord{
			rec(v1alpha1.OperationUp, v1alpha1.OutcomeSucceeded, ""),
			rec(v1alpha1.OperationUp, v1alpha1.OutcomeFailed, v1alpha1.PolicyViolationReason)}, false},
		{"none", nil, false},
	} {
		stack := &v1alpha1.Stack{Status: v1alpha1.StackStatus{History: tc.history}}
		if got := stoppedByPolicy(stack); got != tc.want {
			t.Errorf("%s: stoppedByPolicy = %v, want %v", tc.name, got, tc.want)
		}
	}
}
