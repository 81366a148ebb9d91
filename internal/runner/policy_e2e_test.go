package runner

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// guardedProgram manages one ConfigMap whose data comes from config; token
// is secret.
const guardedProgram = `name: guarded
runtime: yaml
config:
  namespace:
    type: string
  kubeconfig:
    type: string
  acl:
    type: string
  token:
    type: string
resources:
  provider:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
      enableConfigMapMutable: true
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: settings
        namespace: ${namespace}
      data:
        acl: ${acl}
        token: ${token}
    options:
      provider: ${provider}
`

// TestRunPolicy: Spec.Policy is enforced inside the engine. A mandatory rule
// refuses a create (nothing created, ErrorPolicy naming the resource, the
// rule and the message) and an update (the live ConfigMap keeps its data;
// the rule saw the old inputs from the state); a preview reports the same;
// advisory findings come back without failing; a secret input is read by a
// rule and never shown.
func TestRunPolicy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, guardedProgram)
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	ns := kube.Namespace(t)
	const token = "tok-policy-9f8e7d6c"
	// The refused update rotates the token too: its message shows the old
	// one, a secret of the state only, masked all the same.
	const rotated = "tok-policy-rotated-5a4b3c2d"
	const urn = "urn:pulumi:dev::guarded::kubernetes:core/v1:ConfigMap::settings"
	guard := policy.Policy{Kind: "StackPolicy", Namespace: ns, Name: "guard", Rules: []policy.Rule{
		{Name: "private", Match: policy.Match{Types: []string{"kubernetes:core/v1:ConfigMap"}, Operations: []policy.Operation{policy.Create}},
			Expression:        "resource.inputs.data.acl == 'private'",
			MessageExpression: "'ConfigMap ' + resource.name + ' would be created ' + resource.inputs.data.acl"},
		{Name: "stay-private", Match: policy.Match{Types: []string{"kubernetes:core/v1:ConfigMap"}, Operations: []policy.Operation{policy.Update}},
			Expression:        "resource.inputs.data.acl == resource.oldInputs.data.acl || resource.inputs.data.acl == 'private'",
			MessageExpression: "'acl would go from ' + resource.oldInputs.data.acl + ' to ' + resource.inputs.data.acl + ' (token ' + resource.inputs.data.token + ', was ' + resource.oldInputs.data.token + ')'"},
		{Name: "long-token", Enforcement: policy.Advisory, Match: policy.Match{Types: []string{"kubernetes:core/v1:ConfigMap"}},
			Expression:        "resource.inputs.data.token.size() >= 32",
			MessageExpression: "'token ' + resource.inputs.data.token + ' is short'"},
	}}
	spec := func(typ OperationType, acl string, tok ...string) Spec {
		value := token
		if len(tok) > 0 {
			value = tok[0]
		}
		s := e.spec(typ, ConfigValue{Key: "namespace", Value: ns}, ConfigValue{Key: "kubeconfig", Value: kube.Kubeconfig},
			ConfigValue{Key: "acl", Value: acl}, ConfigValue{Key: "token", Value: value, Secret: true})
		s.Policy = &PolicySpec{Stack: policy.Stack{Namespace: ns, Name: "app"}, Policies: []policy.Policy{guard}}
		return s
	}
	data := func() map[string]string {
		t.Helper()
		var cm corev1.ConfigMap
		err := kube.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)
		if apierrors.IsNotFound(err) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data
	}
	noSecret := func(res Result) {
		t.Helper()
		out, _ := json.Marshal(res)
		g.Expect(string(out)).NotTo(ContainSubstring(token), "the secret token in the result")
		g.Expect(string(out)).NotTo(ContainSubstring(rotated), "the secret token in the result")
	}
	rule := func(name string) string { return "StackPolicy/" + ns + "/guard/" + name }

	// A create refused: nothing exists.
	refused := e.run(spec(OpUp, "public"))
	g.Expect(refused.Outcome).To(Equal(OutcomeFailed))
	g.Expect(refused.ErrorClass).To(Equal(ErrorPolicy), refused.Message)
	g.Expect(refused.Message).To(Equal("PolicyViolation: " + urn + ": " + rule("private") + ": ConfigMap settings would be created public"))
	g.Expect(data()).To(BeNil(), "a refused create created the ConfigMap")
	g.Expect(refused.Policy).To(ContainElement(PolicyFinding{Policy: rule("long-token"), Enforcement: "advisory", URN: urn,
		Message: "token [secret] is short"}))
	noSecret(refused)

	// The preview says the same and changes nothing.
	preview := e.run(spec(OpPreview, "public"))
	g.Expect(preview.ErrorClass).To(Equal(ErrorPolicy), preview.Message)
	g.Expect(preview.Message).To(ContainSubstring(rule("private")))

	// Compliant: applied, the advisory finding reported.
	ok := e.run(spec(OpUp, "private"))
	g.Expect(ok.Outcome).To(Equal(OutcomeSucceeded), ok.Message)
	g.Expect(data()).To(Equal(map[string]string{"acl": "private", "token": token}))
	g.Expect(ok.Policy).To(ConsistOf(PolicyFinding{Policy: rule("long-token"), Enforcement: "advisory", URN: urn,
		Message: "token [secret] is short"}))

	// An update refused with the old inputs from the state: the ConfigMap
	// keeps its data.
	update := e.run(spec(OpUp, "public", rotated))
	g.Expect(update.ErrorClass).To(Equal(ErrorPolicy), update.Message)
	g.Expect(update.Message).To(Equal("PolicyViolation: " + urn + ": " + rule("stay-private") + ": acl would go from private to public (token [secret], was [secret])"))
	g.Expect(data()).To(Equal(map[string]string{"acl": "private", "token": token}), "a refused update changed the ConfigMap")
	noSecret(update)

	// Nothing changed and nothing refused: the same rules, the same program.
	again := e.run(spec(OpUp, "private"))
	g.Expect(again.Outcome).To(Equal(OutcomeSucceeded), again.Message)
	g.Expect(again.Changes.Same).To(BeNumerically(">=", 1))
}

// twoMaps manages a ConfigMap "db" (left out when the program is written
// without it) and a ConfigMap "cache" whose name comes from config (a new
// name replaces it).
func twoMaps(withDB bool) string {
	p := `name: guarded
runtime: yaml
config:
  namespace:
    type: string
  kubeconfig:
    type: string
  cacheName:
    type: string
resources:
  provider:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
      enableConfigMapMutable: true
  cache:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: ${cacheName}
        namespace: ${namespace}
      data:
        role: cache
    options:
      provider: ${provider}
`
	if withDB {
		p += `  db:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: db
        namespace: ${namespace}
      data:
        role: db
    options:
      provider: ${provider}
`
	}
	return p
}

// TestRunPolicyDeletesAndReplaces: rules for deletes and replaces, which
// the engine never asks an analyzer about, are applied on an update plan.
// An up makes the plan first (one preview more) and applies it: a replace
// reaches the analyzer as a replace (a rule for updates does not see it); a
// delete a mandatory rule forbids is refused before the engine changes
// anything, in an up, a preview (whose plan is then removed: nothing
// refused waits for approval) and a destroy.
func TestRunPolicyDeletesAndReplaces(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, twoMaps(true))
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	ns := kube.Namespace(t)
	const dbURN = "urn:pulumi:dev::guarded::kubernetes:core/v1:ConfigMap::db"
	const cacheURN = "urn:pulumi:dev::guarded::kubernetes:core/v1:ConfigMap::cache"
	protect := policy.Rule{Name: "protect-db", Match: policy.Match{Names: []string{"db"}, Operations: []policy.Operation{policy.Delete}},
		Expression: "resource.oldInputs.data.role != 'db'", Message: "db holds data: it is never deleted"}
	guard := policy.Policy{Kind: "StackPolicy", Namespace: ns, Name: "guard", Rules: []policy.Rule{protect,
		{Name: "replace-watch", Enforcement: policy.Advisory, Match: policy.Match{Operations: []policy.Operation{policy.Replace}},
			Expression:        "false",
			MessageExpression: "'would replace ' + resource.oldInputs.metadata.name + ' with ' + resource.inputs.metadata.name"},
		{Name: "update-watch", Enforcement: policy.Advisory, Match: policy.Match{Operations: []policy.Operation{policy.Update}},
			Expression: "false", Message: "updated"},
	}}
	spec := func(typ OperationType, withDB bool, cacheName string) Spec {
		e.program = twoMaps(withDB)
		s := e.spec(typ, ConfigValue{Key: "namespace", Value: ns}, ConfigValue{Key: "kubeconfig", Value: kube.Kubeconfig},
			ConfigValue{Key: "cacheName", Value: cacheName})
		s.Policy = &PolicySpec{Stack: policy.Stack{Namespace: ns, Name: "app"}, Policies: []policy.Policy{guard}}
		return s
	}
	exists := func(name string) bool {
		t.Helper()
		err := kube.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return false
		}
		g.Expect(err).NotTo(HaveOccurred())
		return true
	}
	rule := func(name string) string { return "StackPolicy/" + ns + "/guard/" + name }

	created := e.run(spec(OpUp, true, "cache-1"))
	g.Expect(created.Outcome).To(Equal(OutcomeSucceeded), created.Message)
	g.Expect(created.Policy).To(BeEmpty())
	g.Expect(created.PulumiProcesses).To(Equal(3), "stack init, the plan's preview, the up")

	// A replace: the rule for replaces sees it with the old and new
	// inputs, the rule for updates does not.
	replaced := e.run(spec(OpUp, true, "cache-2"))
	g.Expect(replaced.Outcome).To(Equal(OutcomeSucceeded), replaced.Message)
	g.Expect(replaced.Changes.Replace).To(Equal(1))
	g.Expect(replaced.Policy).To(ConsistOf(PolicyFinding{Policy: rule("replace-watch"), Enforcement: "advisory", URN: cacheURN,
		Message: "would replace cache-1 with cache-2"}))
	g.Expect(replaced.PulumiProcesses).To(Equal(2), "the plan's preview and the up")
	g.Expect(exists("cache-2") && !exists("cache-1")).To(BeTrue())

	// A preview that would delete db: refused, and its plan removed.
	preview := spec(OpPreview, false, "cache-2")
	preview.Plan = filepath.Join(t.TempDir(), "plans", "p1.json")
	refusedPreview := e.run(preview)
	g.Expect(refusedPreview.ErrorClass).To(Equal(ErrorPolicy), refusedPreview.Message)
	g.Expect(refusedPreview.Message).To(Equal("PolicyViolation: " + dbURN + ": " + rule("protect-db") + ": db holds data: it is never deleted"))
	g.Expect(preview.Plan).NotTo(BeAnExistingFile(), "a refused preview left its plan to approve")

	// The up: refused before the engine ran; db is still there.
	refused := e.run(spec(OpUp, false, "cache-2"))
	g.Expect(refused.ErrorClass).To(Equal(ErrorPolicy), refused.Message)
	g.Expect(refused.Message).To(Equal("PolicyViolation: " + dbURN + ": " + rule("protect-db") + ": db holds data: it is never deleted"))
	g.Expect(refused.PulumiProcesses).To(Equal(1), "only the plan's preview ran")
	g.Expect(exists("db")).To(BeTrue(), "a refused delete deleted db")

	// A destroy deletes db too: refused, nothing deleted.
	destroy := e.run(spec(OpDestroy, true, "cache-2"))
	g.Expect(destroy.ErrorClass).To(Equal(ErrorPolicy), destroy.Message)
	g.Expect(destroy.Policy).To(ConsistOf(PolicyFinding{Policy: rule("protect-db"), Enforcement: "mandatory", URN: dbURN,
		Message: "db holds data: it is never deleted"}))
	g.Expect(exists("db") && exists("cache-2")).To(BeTrue(), "a refused destroy deleted something")

	// Made advisory, the rule lets the delete through and says so.
	guard.Rules[0].Enforcement = policy.Advisory
	deleted := e.run(spec(OpUp, false, "cache-2"))
	g.Expect(deleted.Outcome).To(Equal(OutcomeSucceeded), deleted.Message)
	g.Expect(deleted.Policy).To(ConsistOf(PolicyFinding{Policy: rule("protect-db"), Enforcement: "advisory", URN: dbURN,
		Message: "db holds data: it is never deleted"}))
	g.Expect(exists("db")).To(BeFalse())
}
