package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestPolicyPacks: spec.policyPacks fetched from Git beside the program.
// A TypeScript pack, whose Node.js host the controller's runner does not
// have, stops every up before anything runs, with a reason that names the
// pack, its runtime and what to change; so does a folder with no
// PulumiPolicy.yaml. A pack whose host the runner has reaches the engine,
// which runs it (the YAML host serves no analyzer: Pulumi's own error). No
// pack: the Stack applies.
func TestPolicyPacks(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.commit = f.git.Commit(t, "infra", "main", map[string]string{
		"app/Pulumi.yaml":              bridgeProgram(""),
		"packs/org/PulumiPolicy.yaml":  "name: org\nruntime: nodejs\ndescription: the organisation's rules\n",
		"packs/org/index.ts":           "// new PolicyPack(\"org\", {policies: []});\n",
		"packs/yaml/PulumiPolicy.yaml": "name: y\nruntime: yaml\n",
		"packs/none/README.md":         "not a pack\n",
	}, "packs")
	f.start(t)
	logOnFailure(t, f)
	pack := func(name, dir string) v1alpha1.PolicyPack {
		return v1alpha1.PolicyPack{Name: name, Source: v1alpha1.StackSource{
			Git: &v1alpha1.GitSource{URL: f.repoURL, Ref: &v1alpha1.GitRef{Branch: "main"}}, Dir: dir}}
	}
	stack := f.stack("packed", func(s *v1alpha1.Stack) { s.Spec.PolicyPacks = []v1alpha1.PolicyPack{pack("org", "packs/org")} })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitNotReady(t, key, v1alpha1.PolicyPackFailedReason)
	g.Expect(readyMessage(s)).To(ContainSubstring(`policy pack "org" (runtime nodejs): the runner's image has no pulumi-language-nodejs on PATH`))
	g.Expect(s.Status.LastAppliedRevision).To(BeEmpty(), "nothing applied")

	setPacks := func(packs ...v1alpha1.PolicyPack) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			s := getStack(g, key)
			s.Spec.PolicyPacks = packs
			g.Expect(env.Client.Update(ctx, s)).To(Succeed())
		}).Should(Succeed())
		requestReconcile(t, key)
	}
	setPacks(pack("org", "packs/none"))
	g.Eventually(func(g Gomega) {
		g.Expect(readyMessage(getStack(g, key))).To(ContainSubstring(`spec.policyPacks[org]: revision main@sha1:` + f.commit + ` has no policy pack in "packs/none"`))
	}, "2m").Should(Succeed())

	setPacks(pack("y", "packs/yaml"))
	g.Eventually(func(g Gomega) {
		g.Expect(readyMessage(getStack(g, key))).To(ContainSubstring("unknown service pulumirpc.Analyzer"), "the engine ran the pack")
	}, "2m").Should(Succeed())

	setPacks()
	waitApplied(t, key, f.commit)
}
