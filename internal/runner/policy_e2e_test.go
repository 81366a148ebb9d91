package runner

import (
	"context"
	"encoding/json"
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
	const urn = "urn:pulumi:dev::guarded::kubernetes:core/v1:ConfigMap::settings"
	guard := policy.Policy{Kind: "StackPolicy", Namespace: ns, Name: "guard", Rules: []policy.Rule{
		{Name: "private", Match: policy.Match{Types: []string{"kubernetes:core/v1:ConfigMap"}, Operations: []policy.Operation{policy.Create}},
			Expression:        "resource.inputs.data.acl == 'private'",
			MessageExpression: "'ConfigMap ' + resource.name + ' would be created ' + resource.inputs.data.acl"},
		{Name: "stay-private", Match: policy.Match{Types: []string{"kubernetes:core/v1:ConfigMap"}, Operations: []policy.Operation{policy.Update}},
			Expression:        "resource.inputs.data.acl == resource.oldInputs.data.acl || resource.inputs.data.acl == 'private'",
			MessageExpression: "'acl would go from ' + resource.oldInputs.data.acl + ' to ' + resource.inputs.data.acl + ' (token ' + resource.inputs.data.token + ')'"},
		{Name: "long-token", Enforcement: policy.Advisory, Match: policy.Match{Types: []string{"kubernetes:core/v1:ConfigMap"}},
			Expression:        "resource.inputs.data.token.size() >= 32",
			MessageExpression: "'token ' + resource.inputs.data.token + ' is short'"},
	}}
	spec := func(typ OperationType, acl string) Spec {
		s := e.spec(typ, ConfigValue{Key: "namespace", Value: ns}, ConfigValue{Key: "kubeconfig", Value: kube.Kubeconfig},
			ConfigValue{Key: "acl", Value: acl}, ConfigValue{Key: "token", Value: token, Secret: true})
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
	update := e.run(spec(OpUp, "public"))
	g.Expect(update.ErrorClass).To(Equal(ErrorPolicy), update.Message)
	g.Expect(update.Message).To(Equal("PolicyViolation: " + urn + ": " + rule("stay-private") + ": acl would go from private to public (token [secret])"))
	g.Expect(data()).To(Equal(map[string]string{"acl": "private", "token": token}), "a refused update changed the ConfigMap")
	noSecret(update)

	// Nothing changed and nothing refused: the same rules, the same program.
	again := e.run(spec(OpUp, "private"))
	g.Expect(again.Outcome).To(Equal(OutcomeSucceeded), again.Message)
	g.Expect(again.Changes.Same).To(BeNumerically(">=", 1))
}
