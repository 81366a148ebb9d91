package policy

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A plan as `pulumi preview --save-plan` writes it (Pulumi v3.276's
// apitype.DeploymentPlanV1): per URN the steps and the goal, whose inputs
// are a diff from the prior inputs; a delete has no goal.
const samplePlan = `{
  "manifest": {"time": "2026-12-05T08:00:00Z", "magic": "", "version": "v3.276.0"},
  "resourcePlans": {
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::kept": {
      "goal": {"type": "kubernetes:core/v1:ConfigMap", "name": "kept", "custom": true,
        "provider": "urn:pulumi:dev::app::pulumi:providers:kubernetes::default::0f3c",
        "inputDiff": {"updates": {"data": {"color": "blue"}}, "deletes": ["immutable"]}},
      "steps": ["update"], "state": {}
    },
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::fresh": {
      "goal": {"type": "kubernetes:core/v1:ConfigMap", "name": "fresh", "custom": true,
        "inputDiff": {"adds": {
          "data": {"token": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "plaintext": "\"hunter2\""}},
          "metadata": {"name": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"},
          "__defaults": []}}},
      "steps": ["create"], "state": {}
    },
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::moved": {
      "goal": {"type": "kubernetes:core/v1:ConfigMap", "name": "moved", "custom": true,
        "inputDiff": {"updates": {"metadata": {"namespace": "other"}}}},
      "steps": ["create-replacement", "replace", "delete-replaced"], "state": {}
    },
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::db": {"steps": ["delete"], "state": null},
    "urn:pulumi:dev::app::pulumi:pulumi:Stack::app-dev": {
      "goal": {"type": "pulumi:pulumi:Stack", "name": "app-dev", "inputDiff": {}}, "steps": ["same"], "state": {}},
    "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::looked-up": {"steps": ["read"], "state": {}}
  }
}`

func TestPlanChangesReadsEachResourcesOperationAndInputs(t *testing.T) {
	prior := map[string]map[string]any{
		"urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::kept":  {"data": map[string]any{"color": "red"}, "immutable": true, "kind": "ConfigMap"},
		"urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::moved": {"metadata": map[string]any{"namespace": "here"}},
		"urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::db":    {"metadata": map[string]any{"labels": map[string]any{"keep": "true"}}},
	}
	changes, err := PlanChanges([]byte(samplePlan), prior, nil)
	if err != nil {
		t.Fatalf("PlanChanges: %v", err)
	}
	byName := map[string]Resource{}
	var names []string
	for _, c := range changes {
		byName[c.Name] = c
		names = append(names, c.Name)
	}
	// In URN order; the read is no change of a managed resource.
	if want := []string{"db", "fresh", "kept", "moved", "app-dev"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("changes %v, want %v", names, want)
	}
	for name, op := range map[string]string{"db": "delete", "fresh": "create", "kept": "update", "moved": "replace", "app-dev": Same} {
		if byName[name].Op != op {
			t.Errorf("%s: op %q, want %q", name, byName[name].Op, op)
		}
	}
	db := byName["db"]
	if db.Type != "kubernetes:core/v1:ConfigMap" || len(db.Inputs) != 0 || !reflect.DeepEqual(db.OldInputs, prior[db.URN]) {
		t.Errorf("the delete: type %q, inputs %v, old inputs %v", db.Type, db.Inputs, db.OldInputs)
	}
	kept := byName["kept"]
	if want := map[string]any{"data": map[string]any{"color": "blue"}, "kind": "ConfigMap"}; !reflect.DeepEqual(kept.Inputs, want) {
		t.Errorf("the update's inputs %v, want %v (prior with the diff applied)", kept.Inputs, want)
	}
	if kept.Provider.URN != "urn:pulumi:dev::app::pulumi:providers:kubernetes::default" {
		t.Errorf("the update's provider %q", kept.Provider.URN)
	}
	fresh := byName["fresh"]
	if want := (Secret{Value: "hunter2"}); fresh.Inputs["data"].(map[string]any)["token"] != want {
		t.Errorf("the secret input %#v, want %#v", fresh.Inputs["data"], want)
	}
	if fresh.Inputs["metadata"].(map[string]any)["name"] != (Unknown{}) {
		t.Errorf("the unknown input %#v", fresh.Inputs["metadata"])
	}
	if _, ok := fresh.Inputs["__defaults"]; ok {
		t.Errorf("the engine's own key is an input: %v", fresh.Inputs)
	}
	if got := byName["moved"].Inputs["metadata"]; !reflect.DeepEqual(got, map[string]any{"namespace": "other"}) {
		t.Errorf("the replace's inputs %v", got)
	}
}

func TestPlanChangesOpensCiphertextOrLeavesItUnknown(t *testing.T) {
	plan := `{"resourcePlans": {"urn:pulumi:dev::app::t:m:R::r": {"goal": {"type": "t:m:R", "name": "r", "inputDiff": {"adds": {
		"password": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}}}}, "steps": ["create"]}}}`
	changes, err := PlanChanges([]byte(plan), nil, func(c string) (string, error) {
		if c != "v1:abc" {
			return "", errors.New("wrong")
		}
		return `"opened"`, nil
	})
	if err != nil || changes[0].Inputs["password"] != (Secret{Value: "opened"}) {
		t.Fatalf("decrypted: %v, %#v", err, changes)
	}
	changes, err = PlanChanges([]byte(plan), nil, nil)
	if err != nil || changes[0].Inputs["password"] != (Secret{Value: Unknown{}}) {
		t.Fatalf("without a decrypter: %v, %#v", err, changes)
	}
	// A secret that is not JSON is an error that does not quote it.
	bad := strings.Replace(plan, `"ciphertext": "v1:abc"`, `"plaintext": "s3cret-not-json"`, 1)
	if _, err := PlanChanges([]byte(bad), nil, nil); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a broken secret: %v", err)
	}
}

func TestPlanChangesRefusesWhatIsNotAPlan(t *testing.T) {
	for _, data := range []string{`{}`, `[1]`, `not json`} {
		if _, err := PlanChanges([]byte(data), nil, nil); err == nil || !strings.Contains(err.Error(), "not a Pulumi update plan") {
			t.Errorf("%s: %v", data, err)
		}
	}
	// A VersionedDeploymentPlan wraps one.
	if changes, err := PlanChanges([]byte(`{"version": 1, "plan": `+samplePlan+`}`), nil, nil); err != nil || len(changes) != 5 {
		t.Errorf("versioned: %v, %d changes", err, len(changes))
	}
}

func TestDeletesMatchOnlyRulesThatListThem(t *testing.T) {
	noOps := mustCompile(t, Rule{Name: "labelled", Expression: "has(resource.inputs.labels)"})
	del := Resource{Type: "t:m:R", Name: "db", URN: "urn:pulumi:dev::app::t:m:R::db", Op: string(Delete), Inputs: map[string]any{}}
	if f := noOps.Evaluate(context.Background(), stack, del); len(f) != 0 {
		t.Fatalf("a rule without operations judged a delete: %v", f)
	}
	keep := mustCompile(t,
		Rule{Name: "no-delete", Match: Match{Operations: []Operation{Delete}}, Expression: "!(has(resource.oldInputs.keep) && resource.oldInputs.keep)", Message: "kept"},
		Rule{Name: "every-op", Expression: "false"})
	del.OldInputs = map[string]any{"keep": true}
	f := keep.EvaluateListed(context.Background(), stack, del)
	if len(f) != 1 || f[0].Rule != "no-delete" || f[0].Outcome != Violated || !f[0].Blocks() {
		t.Fatalf("the delete rule: %v", f)
	}
	// EvaluateListed leaves a rule without operations to the analyzer.
	upd := bucket(string(Update), map[string]any{})
	if f := keep.EvaluateListed(context.Background(), stack, upd); len(f) != 0 {
		t.Fatalf("EvaluateListed applied a rule that lists no operation: %v", f)
	}
	if f := keep.Evaluate(context.Background(), stack, upd); len(f) != 1 || f[0].Rule != "every-op" {
		t.Fatalf("Evaluate: %v", f)
	}
}

func TestNeedsPlan(t *testing.T) {
	p := func(rules ...Rule) []Policy { return []Policy{{Kind: "StackPolicy", Name: "p", Rules: rules}} }
	if NeedsPlan(p(Rule{Name: "a", Expression: "true"}, Rule{Name: "b", Expression: "true", Match: Match{Operations: []Operation{Create, Update}}})) {
		t.Error("rules for creates and updates need no plan")
	}
	if !NeedsPlan(p(Rule{Name: "a", Expression: "true", Match: Match{Operations: []Operation{Replace}}})) {
		t.Error("a rule for replaces needs a plan")
	}
	if NeedsPlan(p(Rule{Name: "a", Enforcement: Disabled, Expression: "true", Match: Match{Operations: []Operation{Delete}}})) {
		t.Error("a disabled rule needs no plan")
	}
}
