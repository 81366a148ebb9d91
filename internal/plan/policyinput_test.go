package plan_test

import (
	"encoding/json"
	"os"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/plan/plantest"
	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// A stored plan as policy input: the update plan and the prior inputs the
// runner kept beside it, read together, with no secret in plaintext or
// ciphertext.
func TestPolicyInput(t *testing.T) {
	g := NewWithT(t)
	s, err := plan.NewStore(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	const urn = "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::kept"
	file, err := s.Stage("uid-1", "plan-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(file, []byte(`{"resourcePlans": {"`+urn+`": {
	  "goal": {"type": "kubernetes:core/v1:ConfigMap", "name": "kept",
	    "inputDiff": {"updates": {"data": {"color": "red", "token": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:CIPHERTEXT"}}}}},
	  "steps": ["update"]},
	  "urn:pulumi:dev::app::pulumi:providers:kubernetes::k8s": {"goal": {"type": "pulumi:providers:kubernetes", "name": "k8s",
	    "inputDiff": {"adds": {"kubeconfig": "PROVIDER-CREDENTIAL"}}}, "steps": ["create"]}}}`), 0o600)).To(Succeed())
	// As an older runner might have kept them: a secret in plaintext.
	g.Expect(os.WriteFile(runner.PlanInputsFile(file), []byte(`{"resources": {"`+urn+`": {
	  "metadata": {"name": "kept"},
	  "data": {"color": "blue", "token": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "plaintext": "\"PLAINTEXT\""}}},
	  "urn:pulumi:dev::app::pulumi:providers:kubernetes::old": {"kubeconfig": "OLD-PROVIDER-CREDENTIAL"}}}`), 0o600)).To(Succeed())
	doc := plantest.Document("plan-1")
	g.Expect(s.Commit("uid-1", doc)).To(Succeed())
	g.Expect(s.PlanInputsFile("uid-1", "plan-1")).To(Equal(runner.PlanInputsFile(s.PlanFile("uid-1", "plan-1"))),
		"the store reads the prior inputs where the runner keeps them")

	in, err := s.PolicyInput("uid-1", "plan-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.APIVersion).To(Equal(plan.PolicyInputAPIVersion))
	g.Expect([]string{in.ID, in.Namespace, in.Name}).To(Equal([]string{"plan-1", "ns", "web"}))
	g.Expect(string(in.Plan)).NotTo(ContainSubstring("CIPHERTEXT"))
	g.Expect(in.PriorInputs).To(HaveKey(urn))
	changes, err := policy.PlanChanges(in.Plan, in.PriorInputs, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).To(HaveLen(2))
	g.Expect(changes[0].Inputs).To(HaveKeyWithValue("metadata", map[string]any{"name": "kept"}), "an unchanged input")
	g.Expect(changes[0].Inputs["data"]).To(HaveKeyWithValue("color", "red"))
	g.Expect(changes[0].OldInputs["data"]).To(HaveKeyWithValue("color", "blue"))
	for _, inputs := range []map[string]any{changes[0].Inputs, changes[0].OldInputs} {
		g.Expect(inputs["data"]).To(HaveKeyWithValue("token", policy.Secret{Value: policy.Unknown{}}))
	}
	served := string(mustJSON(g, in))
	g.Expect(served).NotTo(ContainSubstring("PLAINTEXT"), "a secret of the prior inputs")
	g.Expect(served).NotTo(ContainSubstring("PROVIDER-CREDENTIAL"), "a provider's configuration")

	// Without prior inputs (the preview could not read them) the plan is
	// served alone; no plan is ErrNotFound.
	g.Expect(os.Remove(s.PlanInputsFile("uid-1", "plan-1"))).To(Succeed())
	in, err = s.PolicyInput("uid-1", "plan-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.PriorInputs).To(BeNil())
	_, err = s.PolicyInput("uid-1", "plan-9")
	g.Expect(err).To(MatchError(plan.ErrNotFound))
}

func mustJSON(g Gomega, v any) []byte {
	b, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return b
}
