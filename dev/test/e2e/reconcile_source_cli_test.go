package e2e

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestReconcileWithSourceCLI: `stackpilot reconcile --with-source` asks the
// Stack's Flux GitRepository (interval an hour: it would not look again by
// itself) to reconcile, waits for its new artifact, then for the Stack to
// apply it.
func TestReconcileWithSourceCLI(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	env.StartSourceControllerIn(t, f.ns)
	f.start(t)
	repo := fluxObject("GitRepository", f.ns, "infra", map[string]any{
		"url":      f.repoURL,
		"interval": "1h",
		"ref":      map[string]any{"branch": "main"},
	})
	g.Expect(env.Client.Create(ctx, repo)).To(Succeed())
	stack := f.sourceRefStack("from-flux", v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "infra"})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: large")}, "size")
	// Without --with-source the Stack reconciles at the artifact it has.
	out, errOut, code := mustPlanCLI(t, f.ns, "reconcile", stack.Name, "--timeout", "3m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(HaveSuffix(fmt.Sprintf("(revision main@sha1:%s)\n", f.commit)))

	out, errOut, code = mustPlanCLI(t, f.ns, "reconcile", stack.Name, "--with-source", "--timeout", "3m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(HaveSuffix(fmt.Sprintf("(revision main@sha1:%s)\n", next)))
	g.Expect(errOut).To(ContainSubstring("GitRepository"))
	g.Expect(getStack(g, key).Status.LastAppliedRevision).To(Equal("main@sha1:" + next))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "large"))
}
