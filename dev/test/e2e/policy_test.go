package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestPolicy: a StackPolicy's mandatory rule stops a create inside the
// engine (nothing created; Ready False PolicyViolation naming the URN, the
// rule and the message; PolicyCompliant False; status.policy lists it), and
// the commit that fixes the program applies; an advisory rule gives an
// event and a status entry only; a ClusterStackPolicy binds the Stack too;
// a policy that does not compile reports InvalidRule with the rule and the
// position, and the Stacks it selects make no change; fixing or relaxing
// the policy that stopped a Stack runs it again at once, not at its retry.
func TestPolicy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	installPolicyReports(t) // before the controller starts: it finds the kind at once
	f.start(t)

	tenant := &v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "colors", Namespace: f.ns},
		Spec: v1alpha1.StackPolicySpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "yes"}},
			Rules: []v1alpha1.PolicyRule{{
				Name: "no-red", Match: v1alpha1.PolicyMatch{Types: []string{"kubernetes:core/v1:ConfigMap"}, Operations: []string{"create", "update"}},
				Expression:        "resource.inputs.data.color != 'red'",
				MessageExpression: "'ConfigMap ' + resource.name + ' would be ' + resource.inputs.data.color",
			}}}}
	g.Expect(env.Client.Create(ctx, tenant)).To(Succeed())
	// The platform's rule: advisory, for every Stack of namespaces labelled
	// as the test's is (a label only this test sets).
	g.Expect(env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"policy-test":"`+f.ns+`"}}}`)))).To(Succeed())
	platform := &v1alpha1.ClusterStackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "sizes-" + f.ns},
		Spec: v1alpha1.ClusterStackPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"policy-test": f.ns}},
			Rules: []v1alpha1.PolicyRule{{
				Name: "has-size", Enforcement: v1alpha1.EnforcementAdvisory,
				Match:      v1alpha1.PolicyMatch{Types: []string{"kubernetes:core/v1:ConfigMap"}},
				Expression: "has(resource.inputs.data.size)", Message: "every ConfigMap says its size",
			}}}}
	g.Expect(env.Client.Create(ctx, platform)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), platform) })
	g.Eventually(func(g Gomega) {
		var p v1alpha1.StackPolicy
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tenant), &p)).To(Succeed())
		g.Expect(conditions.IsReady(&p)).To(BeTrue())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	// A red ConfigMap is refused before it exists.
	stack := f.stack("guarded", func(s *v1alpha1.Stack) {
		s.Labels = map[string]string{"guarded": "yes"}
		s.Spec.Config["color"] = jsonValue("red")
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitNotReady(t, key, v1alpha1.PolicyViolationReason)
	urn := "urn:pulumi:" + s.GetStackName() + "::bridge::kubernetes:core/v1:ConfigMap::settings"
	g.Expect(readyMessage(s)).To(ContainSubstring("StackPolicy/" + f.ns + "/colors/no-red: ConfigMap settings would be red"))
	g.Expect(readyMessage(s)).To(ContainSubstring(urn))
	g.Expect(s.Status.History[0].Reason).To(Equal(v1alpha1.PolicyViolationReason))
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused create made the ConfigMap")
	compliant := conditions.Get(s, v1alpha1.PolicyCompliantCondition)
	g.Expect(compliant).NotTo(BeNil())
	g.Expect(compliant.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(compliant.Reason).To(Equal(v1alpha1.PolicyViolationReason))
	g.Expect(s.Status.Policy).NotTo(BeNil())
	g.Expect(s.Status.Policy.Policies).To(Equal([]string{"ClusterStackPolicy/sizes-" + f.ns, "StackPolicy/" + f.ns + "/colors"}))
	g.Expect(s.Status.Policy.Violations).To(ContainElements(
		v1alpha1.PolicyViolation{Policy: "StackPolicy/" + f.ns + "/colors/no-red", Enforcement: "mandatory", URN: urn, Message: "ConfigMap settings would be red"},
		v1alpha1.PolicyViolation{Policy: "ClusterStackPolicy/sizes-" + f.ns + "/has-size", Enforcement: "advisory", URN: urn, Message: "every ConfigMap says its size"}))
	// The verdicts as a PolicyReport (wgpolicyk8s.io), owned by the Stack.
	report := waitPolicyReport(t, f.ns, "guarded", s.Status.History[0].ID)
	g.Expect(report.summary).To(Equal(map[string]int64{"pass": 0, "fail": 1, "warn": 1, "error": 0, "skip": 0}))
	g.Expect(report.results).To(Equal([]string{
		"fail StackPolicy/" + f.ns + "/colors no-red " + urn + ": ConfigMap settings would be red",
		"warn ClusterStackPolicy/sizes-" + f.ns + " has-size " + urn + ": every ConfigMap says its size"}))
	g.Expect(report.scope).To(Equal("Stack " + f.ns + "/guarded " + string(s.UID)))
	g.Expect(report.owner).To(Equal("Stack guarded " + string(s.UID)))

	// The fix applies; the advisory rule still reports, as an event too.
	s = getStack(g, key)
	before := s.DeepCopy()
	s.Spec.Config["color"] = jsonValue("green")
	g.Expect(env.Client.Patch(ctx, s, client.MergeFrom(before))).To(Succeed())
	s = waitApplied(t, key, "")
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "green"))
	compliant = conditions.Get(s, v1alpha1.PolicyCompliantCondition)
	g.Expect(compliant.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(compliant.Reason).To(Equal(v1alpha1.AdvisoryViolationReason))
	g.Expect(s.Status.Policy.Violations).To(ConsistOf(
		v1alpha1.PolicyViolation{Policy: "ClusterStackPolicy/sizes-" + f.ns + "/has-size", Enforcement: "advisory", URN: urn, Message: "every ConfigMap says its size"}))
	g.Eventually(func() bool {
		return hasLine(stackEvents(t, f.ns, "guarded"), "PolicyAdvisory")
	}, time.Minute, time.Second).Should(BeTrue(), "an event for the advisory finding")
	report = waitPolicyReport(t, f.ns, "guarded", s.Status.History[0].ID)
	g.Expect(report.summary).To(Equal(map[string]int64{"pass": 1, "fail": 0, "warn": 1, "error": 0, "skip": 0}))
	g.Expect(report.results).To(Equal([]string{
		"warn ClusterStackPolicy/sizes-" + f.ns + " has-size " + urn + ": every ConfigMap says its size",
		"pass StackPolicy/" + f.ns + "/colors  : no rule found anything in up " + s.Status.History[0].ID}))

	// A policy that does not compile: InvalidRule with where; the Stacks
	// it selects make no change.
	broken := &v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: f.ns},
		Spec: v1alpha1.StackPolicySpec{Rules: []v1alpha1.PolicyRule{{Name: "typo", Expression: "resource.inputs.data.color == 'green' && resource.nme == 'x'"}}}}
	g.Expect(env.Client.Create(ctx, broken)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var p v1alpha1.StackPolicy
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(broken), &p)).To(Succeed())
		c := conditions.Get(&p, v1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.InvalidRuleReason))
		g.Expect(c.Message).To(ContainSubstring("rule typo: expression (line 1, column 50): undefined field 'nme'"))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	// From now on a failed attempt waits an hour for its retry: within this
	// test, only a change (of the Stack, or of the policies that stopped it)
	// runs it again.
	s = getStack(g, key)
	before = s.DeepCopy()
	s.Spec.RetryInterval = &metav1.Duration{Duration: time.Hour}
	s.Spec.Config["color"] = jsonValue("blue")
	g.Expect(env.Client.Patch(ctx, s, client.MergeFrom(before))).To(Succeed())
	s = waitNotReady(t, key, v1alpha1.PolicyInvalidReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("StackPolicy " + f.ns + "/broken selects this Stack and does not compile"))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "green"), "no change while a policy cannot be checked")
	invalidDigest := s.Status.Policy.Digest
	g.Expect(invalidDigest).To(HavePrefix("sha256:"))
	report = waitPolicyReport(t, f.ns, "guarded", s.Status.History[0].ID)
	g.Expect(report.summary).To(HaveKeyWithValue("error", int64(1)))
	g.Expect(report.results).To(ConsistOf(HavePrefix("error StackPolicy/" + f.ns + "/broken  : StackPolicy " + f.ns + "/broken selects this Stack and does not compile")))

	// The policy is fixed: the Stack it stopped runs at once, though its
	// retry is an hour away.
	var p v1alpha1.StackPolicy
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(broken), &p)).To(Succeed())
	before2 := p.DeepCopy()
	p.Spec.Rules[0].Expression = "resource.inputs.data.color != 'black'"
	p.Spec.Rules[0].Match = v1alpha1.PolicyMatch{Types: []string{"kubernetes:core/v1:ConfigMap"}}
	g.Expect(env.Client.Patch(ctx, &p, client.MergeFrom(before2))).To(Succeed())
	s = waitAppliedAfterPolicy(t, key)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	g.Expect(s.Status.Policy.Digest).To(HavePrefix("sha256:"))
	g.Expect(s.Status.Policy.Digest).NotTo(Equal(invalidDigest))

	// A mandatory rule stops a change; the rule made advisory, the change
	// applies at once, reported as an advisory finding.
	s = getStack(g, key)
	before = s.DeepCopy()
	s.Spec.Config["color"] = jsonValue("red")
	g.Expect(env.Client.Patch(ctx, s, client.MergeFrom(before))).To(Succeed())
	waitNotReady(t, key, v1alpha1.PolicyViolationReason)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tenant), &p)).To(Succeed())
	before2 = p.DeepCopy()
	p.Spec.Rules[0].Enforcement = v1alpha1.EnforcementAdvisory
	g.Expect(env.Client.Patch(ctx, &p, client.MergeFrom(before2))).To(Succeed())
	s = waitAppliedAfterPolicy(t, key)
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "red"))
	g.Expect(s.Status.Policy.Violations).To(ContainElement(
		v1alpha1.PolicyViolation{Policy: "StackPolicy/" + f.ns + "/colors/no-red", Enforcement: "advisory", URN: urn, Message: "ConfigMap settings would be red"}))
	g.Expect(strings.Count(f.ctrl.Logs(t), "panic")).To(BeZero())
}

func jsonValue(s string) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: []byte(strconv.Quote(s))}
}

// TestPolicyApproval: approval and policies. A plan made before the policy
// existed is refused when approved (the approved up runs the rules too:
// nothing applied); a preview that breaks a mandatory rule makes no plan
// to approve; a compliant change is planned, approved and applied.
func TestPolicyApproval(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newApprovalFixture(t)
	f.start(t)
	logOnFailure(t, f.fixture)
	stack := f.approvalStack("guarded", v1alpha1.ApprovalManual)
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	blue := waitPlan(t, key, f.commit, "", v1alpha1.AwaitingApprovalReason).Status.PendingPlan

	// Before the policy exists, its rules are tried on the pending plan.
	redOnly := writePolicyFile(t, `apiVersion: stackpilot.dev/v1alpha1
kind: StackPolicy
metadata: {name: red-only, namespace: `+f.ns+`}
spec:
  rules:
  - name: red
    match: {types: ["kubernetes:core/v1:ConfigMap"]}
    expression: resource.inputs.data.color == 'red'
    messageExpression: "stack.name + ': color ' + resource.inputs.data.color + ' is not red'"
`)
	// As `stackpilot plan` reads it: a reader of the Stack's token.
	ctrl := []string{"--controller-url", "https://" + f.ctrl.LogsAddr, "--insecure-skip-tls-verify", "--token", stackReaderToken(t, f.ns)}
	out, errOut, code := mustPlanCLI(t, f.ns, append([]string{"policy", "test", "-f", redOnly, "--stack", "guarded"}, ctrl...)...)
	g.Expect(code).To(Equal(3), "a mandatory violation of the pending plan\nstdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(ContainSubstring("create urn:pulumi:"))
	g.Expect(out).To(ContainSubstring("guarded: color blue is not red"))

	only := &v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "red-only", Namespace: f.ns},
		Spec: v1alpha1.StackPolicySpec{Rules: []v1alpha1.PolicyRule{{
			Name: "red", Match: v1alpha1.PolicyMatch{Types: []string{"kubernetes:core/v1:ConfigMap"}},
			Expression: "resource.inputs.data.color == 'red'", MessageExpression: "'color ' + resource.inputs.data.color + ' is not red'",
		}}}}
	g.Expect(env.Client.Create(ctx, only)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var p v1alpha1.StackPolicy
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(only), &p)).To(Succeed())
		g.Expect(conditions.IsReady(&p)).To(BeTrue())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	// The plan of before is approved: its up is refused, nothing applied.
	approve(t, key, blue.ID)
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		ups := records(s, v1alpha1.OperationUp)
		g.Expect(ups).NotTo(BeEmpty(), "history: %+v", s.Status.History)
		g.Expect(ups[0].Plan).To(Equal(blue.ID))
		g.Expect(ups[0].Reason).To(Equal(v1alpha1.PolicyViolationReason), "the approved up: %+v", ups[0])
		g.Expect(ups[0].Message).To(ContainSubstring("StackPolicy/" + f.ns + "/red-only/red: color blue is not red"))
	}, 3*time.Minute, time.Second).Should(Succeed())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "approval-managed"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "an approved plan that breaks a rule applied: %v", err)

	// A green commit: its preview breaks the rule, so no plan waits.
	green := f.commitColor(t, key, "green")
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		previews := records(s, v1alpha1.OperationPreview)
		g.Expect(previews).NotTo(BeEmpty())
		g.Expect(previews[0].Revision).To(HaveSuffix(green))
		g.Expect(previews[0].Reason).To(Equal(v1alpha1.PolicyViolationReason), "the preview: %+v", previews[0])
		g.Expect(previews[0].Plan).To(BeEmpty(), "a refused preview made a plan")
		g.Expect(s.Status.PendingPlan).To(BeNil())
	}, 3*time.Minute, time.Second).Should(Succeed())

	// Red complies: planned, approved, applied.
	red := f.commitColor(t, key, "red")
	plan := waitPlan(t, key, red, "", v1alpha1.AwaitingApprovalReason).Status.PendingPlan
	approve(t, key, plan.ID)
	waitApplied(t, key, red)
	g.Expect(configMapData(g, f.ns, "approval-managed")).To(HaveKeyWithValue("color", "red"))

	// A change of what exists, tried before approval: the rules see the
	// inputs the plan leaves as they are (metadata.name) and those before
	// it (oldInputs), which the preview kept beside the plan.
	g.Expect(env.Client.Delete(ctx, only)).To(Succeed())
	yellow := f.commitColor(t, key, "yellow")
	waitPlan(t, key, yellow, plan.ID, v1alpha1.AwaitingApprovalReason)
	keep := writePolicyFile(t, `apiVersion: stackpilot.dev/v1alpha1
kind: ClusterStackPolicy
metadata: {name: keep-colors}
spec:
  rules:
  - name: same-color
    match: {types: ["kubernetes:core/v1:ConfigMap"], operations: [update, replace]}
    expression: resource.inputs.data.color == resource.oldInputs.data.color
    messageExpression: "resource.inputs.metadata.name + ' goes from ' + resource.oldInputs.data.color + ' to ' + resource.inputs.data.color"
`)
	out, errOut, code = mustPlanCLI(t, f.ns, append([]string{"policy", "test", "-f", keep, "--stack", "guarded", "-o", "json"}, ctrl...)...)
	g.Expect(code).To(Equal(3), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(ContainSubstring(`"message": "approval-managed goes from red to yellow"`))
	g.Expect(errOut).NotTo(ContainSubstring("without the inputs"))
}

// writePolicyFile writes policies for `stackpilot policy test -f`.
func writePolicyFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitAppliedAfterPolicy is waitApplied for a Stack a policy's change
// should run again: a failure for another reason is retried on request
// (retryOtherFailure), never one the policy still causes.
func waitAppliedAfterPolicy(t *testing.T, key client.ObjectKey) *v1alpha1.Stack {
	t.Helper()
	var last *v1alpha1.Stack
	requested := map[string]bool{}
	NewWithT(t).Eventually(func(g Gomega) {
		last = getStack(g, key)
		retryOtherFailure(t, last, requested)
		g.Expect(conditions.IsReady(last)).To(BeTrue(), "Ready: %s", readyMessage(last))
		g.Expect(last.Status.ObservedGeneration).To(Equal(last.Generation))
	}, 4*time.Minute, time.Second).Should(Succeed())
	return last
}

var policyReportsOnce sync.Once

// installPolicyReports installs the wgpolicyk8s.io PolicyReport CRD into
// the tests' API server, once (testdata/crds: Kyverno's kind, which the
// controller writes where it is served).
func installPolicyReports(t *testing.T) {
	t.Helper()
	policyReportsOnce.Do(func() {
		data, err := os.ReadFile(filepath.Join("testdata", "crds", "policyreports.wgpolicyk8s.io.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	})
	NewWithT(t).Eventually(func(g Gomega) {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: "policyreports.wgpolicyk8s.io"}, crd)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m := c.(map[string]any)
			established = established || (m["type"] == "Established" && m["status"] == "True")
		}
		g.Expect(established).To(BeTrue())
		// Served: a list answers (a CRD just established may not yet).
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("wgpolicyk8s.io/v1alpha2")
		list.SetKind("PolicyReportList")
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace("default"))).To(Succeed())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
}

// policyReportView is what a test compares of a PolicyReport: its summary,
// each result as "<result> <policy> <rule> <urn>: <message>", its scope as
// "<kind> <namespace>/<name> <uid>" and its controller as "<kind> <name> <uid>".
type policyReportView struct {
	summary      map[string]int64
	results      []string
	scope, owner string
}

// waitPolicyReport waits for the PolicyReport of Stack name written by
// operation id, and reads it.
func waitPolicyReport(t *testing.T, ns, name, id string) policyReportView {
	t.Helper()
	var v policyReportView
	NewWithT(t).Eventually(func(g Gomega) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("wgpolicyk8s.io/v1alpha2")
		u.SetKind("PolicyReport")
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "stackpilot-stack-" + name}, u)).To(Succeed())
		v = policyReportView{summary: map[string]int64{}}
		summary, _, _ := unstructured.NestedMap(u.Object, "summary")
		for k, n := range summary {
			v.summary[k], _ = n.(int64)
		}
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		var ids []string
		for _, r := range results {
			m := r.(map[string]any)
			props, _ := m["properties"].(map[string]any)
			ids = append(ids, fmt.Sprint(props["operationID"]))
			urn := ""
			if props["urn"] != nil {
				urn = fmt.Sprint(props["urn"])
			}
			g.Expect(m["source"]).To(Equal("stackpilot"))
			g.Expect(m["timestamp"]).To(HaveKey("seconds"))
			v.results = append(v.results, fmt.Sprintf("%v %v %v %s: %v", m["result"], m["policy"], valueOr(m["rule"]), urn, m["message"]))
		}
		for _, id2 := range ids {
			g.Expect(id2).To(Equal(id), "a result of another operation")
		}
		scope, _, _ := unstructured.NestedStringMap(u.Object, "scope")
		v.scope = fmt.Sprintf("%s %s/%s %s", scope["kind"], scope["namespace"], scope["name"], scope["uid"])
		for _, o := range u.GetOwnerReferences() {
			if o.Controller != nil && *o.Controller {
				v.owner = fmt.Sprintf("%s %s %s", o.Kind, o.Name, o.UID)
			}
		}
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	return v
}

func valueOr(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}
