package stack

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// A Stack's policy verdicts are also written as a wgpolicyk8s.io
// PolicyReport, where that CRD is installed (Kyverno and policy-reporter
// install it), so that findings on cloud resources sit beside the
// Kubernetes ones in the tools that read reports. Nothing is installed for
// it: without the CRD, no report is written and nothing fails.

// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;create;patch;delete

// policyReportGVK is the PolicyReport version written: v1alpha2 is the one
// Kyverno, policy-reporter and their UIs read.
var policyReportGVK = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"}

const (
	// policyReportSource names Stackpilot as the results' source.
	policyReportSource = "stackpilot"
	// maxPolicyReportResults bounds a report's results: an object must stay
	// well under etcd's 1.5 MiB, and a report is a summary, not a log.
	maxPolicyReportResults = 200
	// policyReportFieldOwner owns the report's fields (server-side apply).
	policyReportFieldOwner = "stackpilot-controller"
)

// policyReportName is the report of Stack name: one per Stack, replaced
// by each up, preview or destroy that policies select.
func policyReportName(stack string) string { return "stackpilot-stack-" + stack }

// writePolicyReport applies the Stack's PolicyReport from an operation's
// findings, or deletes it when no policy selects the Stack any more. A
// report that cannot be written is logged and reported as an event; the
// operation's outcome does not depend on it.
func (r *StackReconciler) writePolicyReport(ctx context.Context, st *reconcileState, res *runner.Result) {
	if !policyApplies(res.Type) {
		return
	}
	if st.policy == nil && res.ErrorClass != runner.ErrorPolicyInvalid && !st.policyDropped {
		return // no policy, now or before: no report, and no lookup
	}
	installed, err := r.policyReportsInstalled()
	if err != nil || !installed {
		return // not installed: nothing to write (a discovery error: next time)
	}
	stack := st.stack
	log := ctrl.LoggerFrom(ctx)
	if st.policy == nil && res.ErrorClass != runner.ErrorPolicyInvalid {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(policyReportGVK)
		u.SetNamespace(stack.Namespace)
		u.SetName(policyReportName(stack.Name))
		if err := r.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			log.Error(err, "deleting the PolicyReport of a Stack no policy selects")
		}
		return
	}
	report := policyReport(stack, st.policy, res.ID, res, time.Now())
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(report),
		client.FieldOwner(policyReportFieldOwner), client.ForceOwnership); err != nil {
		log.Error(err, "writing the PolicyReport")
		r.event(stack, corev1.EventTypeWarning, "PolicyReportFailed", string(res.Type),
			fmt.Sprintf("the PolicyReport %s could not be written: %v", report.GetName(), err))
	}
}

// policyReportsInstalled asks the RESTMapper whether the API server serves
// PolicyReports (the mapper looks a group it does not know up again, so a
// CRD installed later is found).
func (r *StackReconciler) policyReportsInstalled() (bool, error) {
	_, err := r.RESTMapper().RESTMapping(policyReportGVK.GroupKind(), policyReportGVK.Version)
	if apimeta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// policyReport is the PolicyReport of an operation's findings: one result
// per finding (fail for a mandatory rule, warn for an advisory one) with
// the resource's URN among its properties (a cloud resource is no
// Kubernetes object to reference), and one pass per selecting policy that
// found nothing. Its scope is the Stack, which owns it.
func policyReport(stack *v1alpha1.Stack, spec *runner.PolicySpec, operationID string, res *runner.Result, now time.Time) *unstructured.Unstructured {
	ts := map[string]any{"seconds": now.Unix(), "nanos": int64(0)}
	var results []any
	summary := map[string]int64{"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
	found := map[string]bool{}
	for _, f := range res.Policy {
		policy, rule := splitPolicyName(f.Policy)
		found[policy] = true
		verdict := "warn"
		if f.Enforcement == v1alpha1.EnforcementMandatory {
			verdict = "fail"
		}
		summary[verdict]++
		if len(results) == maxPolicyReportResults {
			continue // counted in the summary
		}
		results = append(results, map[string]any{
			"source": policyReportSource, "policy": policy, "rule": rule, "result": verdict,
			"category": "Pulumi resources", "message": truncate(f.Message, 1000), "timestamp": ts,
			"properties": map[string]any{"urn": truncate(f.URN, 2000), "enforcement": f.Enforcement, "operationID": operationID},
		})
	}
	if res.ErrorClass == runner.ErrorPolicyInvalid {
		// No rule ran: the policy that does not compile is the error.
		summary["error"]++
		results = append(results, map[string]any{
			"source": policyReportSource, "policy": invalidPolicyName(res.Message), "result": "error",
			"category": "Pulumi resources", "message": truncate(res.Message, 1000), "timestamp": ts,
			"properties": map[string]any{"operationID": operationID},
		})
	} else if spec != nil {
		for _, p := range spec.Policies {
			name := p.Kind + "/" + p.ID()
			if found[name] {
				continue
			}
			summary["pass"]++
			results = append(results, map[string]any{
				"source": policyReportSource, "policy": name, "result": "pass",
				"category": "Pulumi resources", "timestamp": ts,
				"message":    fmt.Sprintf("no rule found anything in %s %s", res.Type, operationID),
				"properties": map[string]any{"operationID": operationID},
			})
		}
	}
	sort.SliceStable(results, func(i, j int) bool {
		return resultRank(results[i]) < resultRank(results[j])
	})
	sum := map[string]any{}
	for k, v := range summary {
		sum[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"scope": map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Stack",
			"namespace": stack.Namespace, "name": stack.Name, "uid": string(stack.UID),
		},
		"summary": sum,
		"results": results,
	}}
	u.SetGroupVersionKind(policyReportGVK)
	u.SetNamespace(stack.Namespace)
	u.SetName(policyReportName(stack.Name))
	u.SetLabels(map[string]string{
		"app.kubernetes.io/managed-by": "stackpilot",
		"stackpilot.dev/stack":         truncate(stack.Name, 63),
	})
	controller := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Stack",
		Name: stack.Name, UID: stack.UID, Controller: &controller}})
	return u
}

// resultRank orders results as a reader looks for them: errors and
// failures first.
func resultRank(r any) int {
	switch r.(map[string]any)["result"] {
	case "error":
		return 0
	case "fail":
		return 1
	case "warn":
		return 2
	}
	return 3
}

// invalidPolicyName is the "<kind> <id>" an InvalidError names, as
// "<kind>/<id>", else the message's start.
func invalidPolicyName(message string) string {
	kind, rest, ok := strings.Cut(message, " ")
	if !ok {
		return truncate(message, 100)
	}
	id, _, _ := strings.Cut(rest, " ")
	return kind + "/" + id
}
