package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testPlan is a plan as `pulumi preview --save-plan` writes it: a create,
// an update of "kept" (its data only: the rest of its inputs are in the
// state), the delete of "db", an unchanged stack.
const testPlan = `{
  "manifest": {"time": "2026-12-05T08:00:00Z", "magic": "", "version": "v3.276.0"},
  "resourcePlans": {
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::cache": {
      "goal": {"type": "kubernetes:core/v1:ConfigMap", "name": "cache", "custom": true,
        "inputDiff": {"adds": {"metadata": {"name": "cache"}, "data": {"role": "cache"}}}},
      "steps": ["create"]},
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::kept": {
      "goal": {"type": "kubernetes:core/v1:ConfigMap", "name": "kept", "custom": true,
        "inputDiff": {"updates": {"data": {"role": "kept", "owner": "team-a"}}}},
      "steps": ["update"]},
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::db": {"steps": ["delete"]},
    "urn:pulumi:dev::app::pulumi:pulumi:Stack::app-dev": {
      "goal": {"type": "pulumi:pulumi:Stack", "name": "app-dev"}, "steps": ["same"]}
  }
}`

const testState = `{"version": 3, "deployment": {"resources": [
  {"urn": "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::kept", "inputs": {"metadata": {"name": "kept", "labels": {"owner": "team-a"}}, "data": {"role": "old"}}},
  {"urn": "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::db", "inputs": {"metadata": {"name": "db"}, "data": {"role": "db"}}}
]}}`

const testPolicies = `apiVersion: stackpilot.dev/v1alpha1
kind: StackPolicy
metadata:
  name: guardrails
  namespace: team-a
spec:
  rules:
  - name: keep-db
    match:
      operations: [delete]
    expression: resource.oldInputs.data.role != 'db'
    message: the db ConfigMap holds data and is never deleted
  - name: has-owner
    enforcement: advisory
    match:
      types: ["kubernetes:core/v1:ConfigMap"]
    expression: has(resource.inputs.metadata.labels) && 'owner' in resource.inputs.metadata.labels
    messageExpression: "'ConfigMap ' + resource.name + ' names no owner in ' + stack.namespace"
---
apiVersion: stackpilot.dev/v1alpha1
kind: ClusterStackPolicy
metadata:
  name: org
spec:
  rules:
  - name: no-red
    expression: "!has(resource.inputs.data) || !('color' in resource.inputs.data) || resource.inputs.data.color != 'red'"
`

func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPolicyTestFindsAMandatoryViolationInAPlan(t *testing.T) {
	policies := writeTestFile(t, "policies.yaml", testPolicies)
	plan := writeTestFile(t, "plan.json", testPlan)
	state := writeTestFile(t, "state.json", testState)
	var out, errOut bytes.Buffer
	code := run([]string{"policy", "test", "-f", policies, "--plan", plan, "--state", state, "--stack", "team-a/app"}, &out, &errOut)
	if code != 3 {
		t.Fatalf("exit %d, want 3 (a mandatory violation)\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	text := out.String()
	for _, want := range []string{
		"MANDATORY  delete urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::db\n           StackPolicy/team-a/guardrails/keep-db: the db ConfigMap holds data and is never deleted",
		// The create sets no labels: advisory. The update keeps the
		// labels the state has: compliant, so not listed.
		"advisory   create urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::cache\n           StackPolicy/team-a/guardrails/has-owner: ConfigMap cache names no owner in team-a",
		"2 policies, 4 changes (1 create, 1 update, 1 delete, 1 same): 1 mandatory violation(s)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "::kept") {
		t.Errorf("the update keeps its owner label from the state, yet was reported:\n%s", text)
	}

	// JSON, and without the state: the update's labels are unknown to the
	// plan alone, so has-owner reports it too.
	out.Reset()
	code = run([]string{"policy", "test", "-f", policies, "--plan", plan, "-o", "json"}, &out, &errOut)
	if code != 3 {
		t.Fatalf("-o json: exit %d\n%s", code, errOut.String())
	}
	var report policyTestReport
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out.String())
	}
	if report.Mandatory != 1 || report.Advisory != 2 || report.Changes["delete"] != 1 || len(report.Policies) != 2 {
		t.Fatalf("-o json: %+v", report)
	}
	// Without the state the delete's old inputs are unknown: the rule
	// cannot be evaluated, which blocks like a violation.
	var del *policyTestFinding
	for i, f := range report.Findings {
		if f.Op == "delete" {
			del = &report.Findings[i]
		}
	}
	if del == nil || del.Enforcement != "mandatory" || del.Outcome != "failed" || !strings.Contains(del.Message, "no such key") {
		t.Errorf("the delete without the state: %+v", del)
	}
}

func TestPolicyTestPassesACompliantPlan(t *testing.T) {
	policies := writeTestFile(t, "policies.yaml", strings.Replace(testPolicies, "operations: [delete]", "operations: [delete]\n      names: [nothing]", 1))
	plan := writeTestFile(t, "plan.json", testPlan)
	state := writeTestFile(t, "state.json", testState)
	var out, errOut bytes.Buffer
	if code := run([]string{"policy", "test", "-f", policies, "--plan", plan, "--state", state}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "no mandatory rule is violated; 1 advisory finding(s)") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestPolicyTestRefusesBrokenInput(t *testing.T) {
	plan := writeTestFile(t, "plan.json", testPlan)
	for _, tc := range []struct {
		name, policies string
		args           []string
		code           int
		want           string
	}{
		{"a rule that does not compile", strings.Replace(testPolicies, "resource.oldInputs.data.role", "resource.oldInputz.data.role", 1), nil, 1,
			"StackPolicy team-a/guardrails: rule keep-db: expression (line 1, column 9): undefined field 'oldInputz'"},
		{"a misspelt field", strings.Replace(testPolicies, "expression: resource.oldInputs", "expresion: resource.oldInputs", 1), nil, 1,
			`unknown field "expresion"`},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", nil, 1, `apiVersion "v1": want stackpilot.dev/v1alpha1`},
		{"no plan", testPolicies, []string{"--plan", ""}, 2, "needs --plan"},
		{"not a plan", testPolicies, []string{"--plan", writeTestFile(t, "x.json", `{"a": 1}`)}, 1, "not a Pulumi update plan"},
		{"a bad --stack", testPolicies, []string{"--stack", "app"}, 2, "want NAMESPACE/NAME"},
		{"labels for a pending plan", testPolicies, []string{"--plan", "", "--stack", "app", "--stack-labels", "a=b"}, 2, "--stack-labels goes with --plan"},
		{"a state for a pending plan", testPolicies, []string{"--plan", "", "--stack", "app", "--state", plan}, 2, "--state goes with --plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"policy", "test", "-f", writeTestFile(t, "p.yaml", tc.policies), "--plan", plan}, tc.args...)
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d, want %d; stderr should say %q:\n%s", code, tc.code, tc.want, errOut.String())
			}
		})
	}
}
