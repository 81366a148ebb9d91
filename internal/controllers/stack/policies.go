package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	controllerpolicy "github.com/stackpilot/stackpilot/internal/controllers/policy"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// Policies (StackPolicy, ClusterStackPolicy) are enforced by the runner
// inside the engine of ups and previews (internal/policy/analyzer), and on
// an update plan for replaces and deletes, destroys included
// (internal/runner/policyplan.go): the reconciler gathers those that select
// the Stack before each such operation, and reports what they found.

// +kubebuilder:rbac:groups=stackpilot.dev,resources=stackpolicies;clusterstackpolicies,verbs=get;list;watch

// maxPolicyViolations bounds status.policy.violations (the CRD's MaxItems).
const maxPolicyViolations = 20

// maxPolicyEvents bounds the advisory events one operation records.
const maxPolicyEvents = 5

var policyViolationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "stackpilot_policy_violations_total",
	Help: "Policy findings in ups and previews, by policy (<kind>/<policy>), rule and enforcement (mandatory: the operation stopped; advisory).",
}, []string{"policy", "rule", "enforcement"})

func init() { metrics.Registry.MustRegister(policyViolationsTotal) }

// gatherPolicies sets st.policy for an up, a preview or a destroy (its
// rules for deletes): the policies that select the Stack, nil when none
// does. A selecting policy that does not compile is an error: with a guard
// that cannot load, no change is made.
func (r *StackReconciler) gatherPolicies(ctx context.Context, st *reconcileState, typ runner.OperationType) error {
	st.policy, st.policyDigest = nil, ""
	if !policyApplies(typ) {
		return nil
	}
	p, digest, err := controllerpolicy.For(ctx, r.Client, r.APIReader, st.stack)
	st.policyDigest = digest
	if err != nil {
		return err
	}
	st.policy = p
	return nil
}

// policyApplies says whether policies are enforced on an operation of typ.
func policyApplies(typ runner.OperationType) bool {
	return typ == runner.OpUp || typ == runner.OpPreview || typ == runner.OpDestroy
}

// policyErrorClass is ErrorPolicyInvalid for a policy that does not
// compile, else internal (the policies could not be read).
func policyErrorClass(err error) runner.ErrorClass {
	if _, ok := errors.AsType[*controllerpolicy.InvalidError](err); ok {
		return runner.ErrorPolicyInvalid
	}
	return runner.ErrorInternal
}

// recordPolicy sets PolicyCompliant and status.policy from an up's or a
// preview's findings; with no selecting policy, it removes both.
func recordPolicy(st *reconcileState, operationID string, res *runner.Result) {
	stack := st.stack
	if !policyApplies(res.Type) {
		return
	}
	if st.policy == nil && res.ErrorClass != runner.ErrorPolicyInvalid {
		st.policyDropped = stack.Status.Policy != nil
		stack.Status.Policy = nil
		apimeta.RemoveStatusCondition(&stack.Status.Conditions, v1alpha1.PolicyCompliantCondition)
		return
	}
	status := &v1alpha1.StackPolicyStatus{OperationID: operationID, Digest: st.policyDigest}
	if st.policy != nil {
		for _, p := range st.policy.Policies {
			status.Policies = append(status.Policies, p.Kind+"/"+p.ID())
		}
	}
	mandatory, advisory := 0, 0
	for _, f := range res.Policy {
		if f.Enforcement == v1alpha1.EnforcementMandatory {
			mandatory++
		} else {
			advisory++
		}
		if len(status.Violations) == maxPolicyViolations {
			status.More++
			continue
		}
		status.Violations = append(status.Violations, v1alpha1.PolicyViolation{Policy: truncate(f.Policy, 500),
			Enforcement: f.Enforcement, URN: truncate(f.URN, 2000), Message: truncate(scrub(f.Message, st.inputs.Secrets), 1000)})
	}
	stack.Status.Policy = status
	cond := metav1.Condition{Type: v1alpha1.PolicyCompliantCondition, ObservedGeneration: stack.Generation}
	switch {
	case res.ErrorClass == runner.ErrorPolicyInvalid:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, v1alpha1.PolicyInvalidReason, truncate(res.Message, 2000)
	case mandatory > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.PolicyViolationReason
		cond.Message = truncate(scrub(res.Message, st.inputs.Secrets), 2000)
	case advisory > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.AdvisoryViolationReason
		cond.Message = fmt.Sprintf("%d advisory finding(s) in %s %s; see status.policy", advisory, res.Type, operationID)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.NoViolationReason
		cond.Message = fmt.Sprintf("%s %s: no rule of %d policies found anything", res.Type, operationID, len(status.Policies))
	}
	apimeta.SetStatusCondition(&stack.Status.Conditions, cond)
}

// reportPolicy counts an operation's findings, records its advisory ones
// as Warning events (a mandatory one fails the operation, whose event says
// so), and writes them as a PolicyReport where that kind is served
// (policy_report.go).
func (r *StackReconciler) reportPolicy(ctx context.Context, st *reconcileState, action string, res *runner.Result) {
	r.writePolicyReport(ctx, st, res)
	events := 0
	for _, f := range res.Policy {
		policy, rule := splitPolicyName(f.Policy)
		policyViolationsTotal.WithLabelValues(policy, rule, f.Enforcement).Inc()
		if f.Enforcement == v1alpha1.EnforcementMandatory || events == maxPolicyEvents {
			continue
		}
		events++
		r.event(st.stack, corev1.EventTypeWarning, "PolicyAdvisory", action,
			fmt.Sprintf("%s: %s: %s", f.URN, f.Policy, scrub(f.Message, st.inputs.Secrets)))
	}
}

// splitPolicyName splits "<kind>/<policy id>/<rule>" at its last slash.
func splitPolicyName(name string) (policy, rule string) {
	i := strings.LastIndex(name, "/")
	if i < 0 {
		return name, ""
	}
	return name[:i], name[i+1:]
}

// policyChanged says whether the newest attempt failed because of a policy
// (a mandatory violation, or a selecting policy that does not compile) and
// the policies that select the Stack have changed since: their digest
// differs from status.policy.digest. Only Stacks a policy stopped pay for
// the look (the policies are listed from the cache; a namespaceSelector
// costs one Namespace GET).
func (r *StackReconciler) policyChanged(ctx context.Context, st *reconcileState) bool {
	stack := st.stack
	if stack.Status.Failures == 0 || !stoppedByPolicy(stack) {
		return false
	}
	digest, err := controllerpolicy.DigestFor(ctx, r.Client, r.APIReader, stack)
	if err != nil {
		return false // the policies cannot be read now: the backoff retries
	}
	ran := ""
	if stack.Status.Policy != nil {
		ran = stack.Status.Policy.Digest
	}
	return digest != ran
}

// stoppedByPolicy is true when the newest finished attempt (drift checks
// and skips left out) failed with PolicyViolation or PolicyInvalid.
func stoppedByPolicy(stack *v1alpha1.Stack) bool {
	for _, h := range stack.Status.History {
		if h.FinishedAt != nil && h.Type != v1alpha1.OperationDriftCheck && h.Outcome != v1alpha1.OutcomeSkipped {
			return h.Outcome == v1alpha1.OutcomeFailed &&
				(h.Reason == v1alpha1.PolicyViolationReason || h.Reason == v1alpha1.PolicyInvalidReason)
		}
	}
	return false
}

// stoppedByPolicies maps a StackPolicy (its namespace's Stacks) or a
// ClusterStackPolicy (every Stack this controller serves) created, deleted
// or changed to the Stacks whose failing attempt a policy stopped: decide
// retries them at once if the policies that select them changed. A
// Namespace's labels are not watched: a namespaceSelector that comes to
// match or stops matching is seen at the Stack's retry.
func (r *StackReconciler) stoppedByPolicies(ctx context.Context, obj client.Object) []reconcile.Request {
	var opts []client.ListOption
	if obj.GetNamespace() != "" {
		opts = append(opts, client.InNamespace(obj.GetNamespace()))
	}
	var stacks v1alpha1.StackList
	if err := r.List(ctx, &stacks, opts...); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range stacks.Items {
		s := &stacks.Items[i]
		if s.Status.Failures > 0 && stoppedByPolicy(s) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}
