package runner

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// plannedProgram copies an output of another stack (upstream, whose outputs
// the test sets) into the ConfigMap it manages: the program stays the same
// while what it would do changes with the world.
//
// (A ConfigMap read with the YAML resource option `get:` would be closer to
// home, but the pinned YAML host asserts on it: Kubernetes types carry the
// constants apiVersion and kind, which it takes for properties given with get.)
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
    options:
      provider: ${provider}
`

// upstreamProgram publishes its config value greeting as an output.
const upstreamProgram = `name: upstream
runtime: yaml
config:
  greeting:
    type: string
outputs:
  greeting: ${greeting}
`

// TestRunUpdatePlan: a preview saves a plan and changes nothing; an up with
// the plan applies it; an up whose plan no longer holds applies nothing of it.
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
	setSource := func(greeting string) {
		t.Helper()
		res := upstream.run(upstream.spec(OpUp, ConfigValue{Key: "greeting", Value: greeting}))
		g.Expect(res.Outcome).To(Equal(OutcomeSucceeded), res.Message)
	}
	managed := func() string {
		var cm corev1.ConfigMap
		err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plan-managed"}, &cm)
		if apierrors.IsNotFound(err) {
			return "<absent>"
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm.Data["greeting"]
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
	setSource("hello")

	// (a) The preview writes the plan and changes nothing.
	p1 := preview("p1.json")
	g.Expect(p1.Outcome).To(Equal(OutcomeSucceeded), p1.Message)
	g.Expect(filepath.Join(plans, "p1.json")).To(BeARegularFile())
	g.Expect(p1.Changes.Create).To(Equal(3), "stack, provider, managed")
	g.Expect(p1.Resources).To(ContainElement(
		ResourceChange{URN: managedURN, Type: "kubernetes:core/v1:ConfigMap", Op: "create"}))
	g.Expect(managed()).To(Equal("<absent>"))

	// (b) The up applies exactly the plan.
	u1 := up("p1.json")
	g.Expect(u1.Outcome).To(Equal(OutcomeSucceeded), u1.Message)
	g.Expect(u1.Changes.Create).To(Equal(3))
	g.Expect(managed()).To(Equal("hello"))

	// (c) The plan goes invalid: what the program reads changes between the
	// preview and the up.
	setSource("bonjour")
	p2 := preview("p2.json")
	g.Expect(p2.Outcome).To(Equal(OutcomeSucceeded), p2.Message)
	g.Expect(p2.Resources).To(ContainElement(ResourceChange{URN: managedURN, Type: "kubernetes:core/v1:ConfigMap",
		Op: "update", Properties: []string{"data"}, Paths: []string{"data.greeting"}}))
	g.Expect(managed()).To(Equal("hello"), "a preview changes nothing")
	setSource("hola")
	u2 := up("p2.json")
	g.Expect(u2.Outcome).To(Equal(OutcomeFailed))
	g.Expect(u2.ErrorClass).To(Equal(ErrorPlanInvalid), u2.Message)
	g.Expect(u2.Message).To(HavePrefix("the plan is no longer valid: "))
	g.Expect(managed()).To(Equal("hello"), "nothing beyond the plan is applied")

	// A new plan of the world as it is now applies.
	p3 := preview("p3.json")
	g.Expect(p3.Outcome).To(Equal(OutcomeSucceeded), p3.Message)
	u3 := up("p3.json")
	g.Expect(u3.Outcome).To(Equal(OutcomeSucceeded), u3.Message)
	g.Expect(managed()).To(Equal("hola"))
}
