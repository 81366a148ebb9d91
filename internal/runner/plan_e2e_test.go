package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// plannedProgram copies two outputs of another stack (upstream, whose outputs
// the test sets; token is secret) into the ConfigMap it manages: the program
// stays the same while what it would do changes with the world.
//
// (A ConfigMap read with the YAML resource option `get:` would be closer to
// home, but the pinned YAML host (v1.25) asserts on it: Kubernetes types carry
// the constants apiVersion and kind, which it takes for properties given
// with get.)
const plannedProgram = `name: planned
runtime: yaml
config:
  namespace:
    type: string
  kubeconfig:
    type: string
resources:
  upstream:
    type: pulumi:pulumi:StackReference
    properties:
      name: organization/upstream/dev
  provider:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
      enableConfigMapMutable: true
  managed:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: plan-managed
        namespace: ${namespace}
      data:
        greeting: ${upstream.outputs["greeting"]}
        token: ${upstream.outputs["token"]}
    options:
      provider: ${provider}
`

// extraResource is a resource the plans of plannedProgram never hold.
const extraResource = `  extra:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: plan-extra
        namespace: ${namespace}
      data:
        x: "1"
    options:
      provider: ${provider}
`

// upstreamProgram publishes its config values as outputs.
const upstreamProgram = `name: upstream
runtime: yaml
config:
  greeting:
    type: string
  token:
    type: string
outputs:
  greeting: ${greeting}
  token: ${token}
`

// TestRunUpdatePlan: a preview saves a plan and changes nothing; an up with
// the plan applies it; an up whose plan no longer holds applies nothing
// beyond it and fails with ErrorPlanInvalid.
func TestRunUpdatePlan(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, plannedProgram)
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	ns := kube.Namespace(t)
	ctx := context.Background()
	config := []ConfigValue{{Key: "namespace", Value: ns}, {Key: "kubeconfig", Value: kube.Kubeconfig}}
	managedURN := "urn:pulumi:dev::planned::kubernetes:core/v1:ConfigMap::managed"
	plans := t.TempDir()

	// The upstream stack lives in the same backend.
	upstream := *e
	upstream.program = upstreamProgram
	setUpstream := func(greeting, token string) {
		t.Helper()
		res := upstream.run(upstream.spec(OpUp, ConfigValue{Key: "greeting", Value: greeting},
			ConfigValue{Key: "token", Value: token, Secret: true}))
		g.Expect(res.Outcome).To(Equal(OutcomeSucceeded), res.Message)
	}
	configMap := func(name string) map[string]string {
		t.Helper()
		var cm corev1.ConfigMap
		err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm)
		if apierrors.IsNotFound(err) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data
	}
	preview := func(plan string) Result {
		t.Helper()
		spec := e.spec(OpPreview, config...)
		spec.Plan = filepath.Join(plans, plan)
		return e.run(spec)
	}
	up := func(plan string) Result {
		t.Helper()
		spec := e.spec(OpUp, config...)
		spec.Plan = filepath.Join(plans, plan)
		return e.run(spec)
	}
	setUpstream("hello", "tok-aaaa-1111")

	// (a) The preview writes the plan and changes nothing.
	p1 := preview("p1.json")
	g.Expect(p1.Outcome).To(Equal(OutcomeSucceeded), p1.Message)
	planFile, err := os.ReadFile(filepath.Join(plans, "p1.json"))
	g.Expect(err).NotTo(HaveOccurred(), "the plan file")
	g.Expect(string(planFile)).To(ContainSubstring(managedURN))
	g.Expect(string(planFile)).NotTo(ContainSubstring("tok-aaaa-1111"), "secrets stay encrypted in the plan")
	g.Expect(p1.Changes).To(Equal(ChangeCounts{Create: 3}), "stack, provider, managed")
	g.Expect(p1.Resources).To(ContainElement(
		ResourceChange{URN: managedURN, Type: "kubernetes:core/v1:ConfigMap", Op: "create"}))
	g.Expect(configMap("plan-managed")).To(BeNil(), "a preview creates nothing")

	// (b) The up applies exactly the plan, and Pulumi ran it as a planned update.
	u1 := up("p1.json")
	g.Expect(u1.Outcome).To(Equal(OutcomeSucceeded), u1.Message)
	g.Expect(u1.Changes).To(Equal(p1.Changes))
	g.Expect(u1.Resources).To(ConsistOf(p1.Resources))
	g.Expect(configMap("plan-managed")).To(Equal(map[string]string{"greeting": "hello", "token": "tok-aaaa-1111"}))
	g.Expect(lastUpdateEnvironment(t, e.state, "planned")).To(HaveKeyWithValue("updatePlan", "true"))

	// (c) The plan goes invalid: what the program reads changes between the
	// preview and the up, the program does not.
	setUpstream("bonjour", "tok-bbbb-2222")
	p2 := preview("p2.json")
	g.Expect(p2.Outcome).To(Equal(OutcomeSucceeded), p2.Message)
	g.Expect(p2.Resources).To(ConsistOf(ResourceChange{URN: managedURN, Type: "kubernetes:core/v1:ConfigMap",
		Op: "update", Properties: []string{"data"}, Paths: []string{"data.greeting", "data.token"}}))
	// Beside the plan, the inputs before the change, secrets masked: with
	// them the plan's update has its unchanged inputs (metadata.name).
	checkPlanInputs(t, filepath.Join(plans, "p2.json"), managedURN, "tok-aaaa-1111", "tok-bbbb-2222")
	setUpstream("hola", "tok-cccc-3333")
	u2 := up("p2.json")
	g.Expect(u2.Outcome).To(Equal(OutcomeFailed))
	g.Expect(u2.ErrorClass).To(Equal(ErrorPlanInvalid), u2.Message)
	g.Expect(u2.Message).To(HavePrefix(planInvalidPrefix + "kubernetes:core/v1:ConfigMap (managed): resource " +
		managedURN + " violates plan: properties changed: "))
	g.Expect(u2.Message).To(ContainSubstring("bonjour"), "the planned value")
	g.Expect(u2.Message).To(ContainSubstring("hola"), "the value the up would have applied")
	for _, token := range []string{"tok-aaaa-1111", "tok-bbbb-2222", "tok-cccc-3333"} {
		g.Expect(u2.Message).NotTo(ContainSubstring(token), "a secret in the engine's reason")
	}
	g.Expect(u2.Resources).To(BeEmpty(), "nothing changed")
	g.Expect(configMap("plan-managed")).To(Equal(map[string]string{"greeting": "hello", "token": "tok-aaaa-1111"}),
		"neither the planned nor the new value is applied")

	// A resource no plan holds is not created, whatever else the up does.
	p3 := preview("p3.json")
	g.Expect(p3.Outcome).To(Equal(OutcomeSucceeded), p3.Message)
	extra := e.spec(OpUp, config...)
	extra.Plan = filepath.Join(plans, "p3.json")
	g.Expect(os.WriteFile(filepath.Join(extra.WorkDir, "Pulumi.yaml"), []byte(plannedProgram+extraResource), 0o600)).To(Succeed())
	u3 := e.run(extra)
	g.Expect(u3.ErrorClass).To(Equal(ErrorPlanInvalid), u3.Message)
	g.Expect(u3.Message).To(Equal(planInvalidPrefix +
		"kubernetes:core/v1:ConfigMap (extra): create is not allowed by the plan: no steps were expected for this resource"))
	g.Expect(configMap("plan-extra")).To(BeNil())

	// A plan of the world as it is now applies.
	p4 := preview("p4.json")
	g.Expect(p4.Outcome).To(Equal(OutcomeSucceeded), p4.Message)
	u4 := up("p4.json")
	g.Expect(u4.Outcome).To(Equal(OutcomeSucceeded), u4.Message)
	g.Expect(configMap("plan-managed")).To(Equal(map[string]string{"greeting": "hola", "token": "tok-cccc-3333"}))

	// Plans hold with a refresh first (spec.refresh): the refresh steps are
	// not checked against the plan, the update steps are.
	setUpstream("salut", "tok-dddd-4444")
	withRefresh := func(typ OperationType, plan string) Result {
		t.Helper()
		spec := e.spec(typ, config...)
		spec.Plan, spec.Refresh = filepath.Join(plans, plan), true
		return e.run(spec)
	}
	p5 := withRefresh(OpPreview, "p5.json")
	g.Expect(p5.Outcome).To(Equal(OutcomeSucceeded), p5.Message)
	u5 := withRefresh(OpUp, "p5.json")
	g.Expect(u5.Outcome).To(Equal(OutcomeSucceeded), u5.Message)
	g.Expect(configMap("plan-managed")).To(Equal(map[string]string{"greeting": "salut", "token": "tok-dddd-4444"}))

	// Drift after a plan that changes nothing: the refresh of the up finds
	// it, and putting the program's value back is a step no plan holds.
	p6 := withRefresh(OpPreview, "p6.json")
	g.Expect(p6.Outcome).To(Equal(OutcomeSucceeded), p6.Message)
	g.Expect(p6.Resources).To(BeEmpty())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plan-managed"}}
	g.Expect(kube.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType,
		[]byte(`{"data":{"greeting":"drifted"}}`)))).To(Succeed())
	u6 := withRefresh(OpUp, "p6.json")
	g.Expect(u6.ErrorClass).To(Equal(ErrorPlanInvalid), u6.Message)
	g.Expect(configMap("plan-managed")).To(HaveKeyWithValue("greeting", "drifted"))
}

// checkPlanInputs reads the prior inputs kept beside plan (PlanInputsFile):
// the plan's update of urn, read with them, has every input, the inputs
// before it as oldInputs, and no secret in plaintext.
func checkPlanInputs(t *testing.T, plan, urn string, secrets ...string) {
	t.Helper()
	g := NewWithT(t)
	raw, err := os.ReadFile(PlanInputsFile(plan))
	g.Expect(err).NotTo(HaveOccurred(), "the plan's prior inputs")
	for _, s := range secrets {
		g.Expect(string(raw)).NotTo(ContainSubstring(s), "a secret among the kept inputs")
	}
	var doc PlanInputs
	g.Expect(json.Unmarshal(raw, &doc)).To(Succeed())
	g.Expect(doc.Resources).To(HaveKey(urn))
	data, err := os.ReadFile(plan)
	g.Expect(err).NotTo(HaveOccurred())
	changes, err := policy.PlanChanges(data, doc.Resources, nil)
	g.Expect(err).NotTo(HaveOccurred())
	i := slices.IndexFunc(changes, func(r policy.Resource) bool { return r.URN == urn })
	g.Expect(i).NotTo(Equal(-1), "the plan changes %s", urn)
	g.Expect(changes[i].Op).To(Equal("update"))
	g.Expect(changes[i].Inputs).To(HaveKey("metadata"), "an unchanged input, from the prior inputs")
	g.Expect(changes[i].OldInputs).To(HaveKey("metadata"))
	g.Expect(changes[i].OldInputs["data"]).To(HaveKeyWithValue("token", policy.Secret{Value: policy.Unknown{}}), "the secret, masked")
}

// TestRunFailedPreviewLeavesNoPlan: a plan left at the path by an earlier
// preview is gone when the next preview fails, so it cannot be applied.
func TestRunFailedPreviewLeavesNoPlan(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, "name: broken\nruntime: yaml\noutputs:\n  value: ${undefinedThing}\n")
	spec := e.spec(OpPreview)
	spec.Plan = filepath.Join(t.TempDir(), "plan.json")
	g.Expect(os.WriteFile(spec.Plan, []byte(`{"resourcePlans":{}}`), 0o600)).To(Succeed())
	res := e.run(spec)
	g.Expect(res.ErrorClass).To(Equal(ErrorProgram), res.Message)
	g.Expect(spec.Plan).NotTo(BeAnExistingFile())
}

// lastUpdateEnvironment is the environment Pulumi recorded with the stack's
// latest update in a file:// backend's history (updatePlan: "true" when it
// ran with --plan).
func lastUpdateEnvironment(t *testing.T, state, project string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(state, ".pulumi", "history", project, "dev", "*.history.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no update history for %s: %v", project, err)
	}
	slices.Sort(files) // named dev-<unix nanoseconds>.history.json
	data, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kind        string            `json:"kind"`
		Environment map[string]string `json:"environment"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(h.Kind, "update") {
		t.Fatalf("the latest update of %s is a %q", project, h.Kind)
	}
	return h.Environment
}
