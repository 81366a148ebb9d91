package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestDependsOnPreviewOnly (issue 21, item 17): the network Stack applies,
// then turns PreviewOnly; a commit changes both the network's program and
// the app's, which depends on it. The network previews its change and
// applies none of it (its plan stays pending, Ready PreviewOnly); the app
// does not wait for that plan for ever: it relies on what the network
// applied, and applies the commit. A PreviewOnly Stack that has applied
// nothing is a wait that says why, and what to change.
func TestDependsOnPreviewOnly(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	tree := func(network, app string) map[string]string {
		return map[string]string{
			"network/Pulumi.yaml": layerProgram("network", network),
			"app/Pulumi.yaml":     layerProgram("app", app),
			"solo/Pulumi.yaml":    layerProgram("solo", ""),
		}
	}
	first := f.git.Commit(t, "infra", "main", tree("", ""), "two layers")
	f.start(t)
	logOnFailure(t, f)

	network := f.layerStack("network", "network")
	app := f.layerStack("app", "app", "network")
	for _, s := range []*v1alpha1.Stack{network, app} {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	netKey, appKey := client.ObjectKeyFromObject(network), client.ObjectKeyFromObject(app)
	applied := waitApplied(t, netKey, first)
	waitApplied(t, appKey, first)

	patchStack(t, netKey, map[string]any{"spec": map[string]any{"approval": map[string]any{"mode": v1alpha1.ApprovalPreviewOnly}}})
	second := f.git.Commit(t, "infra", "main", tree("\n        cidr: 10.1.0.0/16", "\n        version: \"2\""), "change both")
	requestReconcile(t, netKey)
	s := waitPlan(t, netKey, second, "", v1alpha1.PreviewOnlyReason)
	g.Expect(s.Status.LastAppliedRevision).To(Equal(applied.Status.LastAppliedRevision), "PreviewOnly applies nothing")
	g.Expect(configMapData(g, f.ns, "layer-network")).NotTo(HaveKey("cidr"))

	requestReconcile(t, appKey)
	ap := waitApplied(t, appKey, second)
	g.Expect(configMapData(g, f.ns, "layer-app")).To(HaveKeyWithValue("version", "2"))
	succeededUp(g, ap, second)
	g.Expect(getStack(g, netKey).Status.PendingPlan).NotTo(BeNil(), "the network's plan is still pending, never applied")

	// A PreviewOnly Stack that never applied anything: its dependent waits,
	// and says what would end the wait.
	never := f.layerStack("never", "solo")
	never.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalPreviewOnly}
	waiting := f.layerStack("waiting", "app", "never")
	for _, s := range []*v1alpha1.Stack{never, waiting} {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		s := getStack(g, client.ObjectKeyFromObject(waiting))
		g.Expect(readyMessage(s)).To(HavePrefix("False/" + v1alpha1.DependencyNotReadyReason + ": dependency never"))
		g.Expect(readyMessage(s)).To(ContainSubstring("never will while its spec.approval.mode is PreviewOnly"))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(getStack(g, client.ObjectKeyFromObject(waiting)).Status.History).To(BeEmpty(), "the waiting Stack ran nothing")
}
