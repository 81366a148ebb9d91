package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// explicitProviderProgram uses an explicit Kubernetes provider (which
// Pulumi finds on $PATH, beside the CLI, as in the controller image) for a
// ConfigMap in a namespace that does not exist.
const explicitProviderProgram = `name: bridge
runtime: yaml
config:
  namespace:
    type: string
resources:
  k8s:
    type: pulumi:providers:kubernetes
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: app-settings
        namespace: no-such-namespace-here
      data:
        color: blue
    options:
      provider: ${k8s}
`

// TestFailureMessageLeadsWithTheError: the Ready message, the history entry
// and the failure event start with the user's problem, not with Pulumi's
// "using pulumi-resource-kubernetes from $PATH" warning.
func TestFailureMessageLeadsWithTheError(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": explicitProviderProgram}, "explicit provider")
	f.start(t)
	stack := f.stack("explicit", func(s *v1alpha1.Stack) { s.Spec.Outputs = nil })
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	s := waitNotReady(t, client.ObjectKeyFromObject(stack), v1alpha1.ProgramErrorReason)

	ready := conditions.Get(s, v1alpha1.ReadyCondition).Message
	g.Expect(ready).NotTo(ContainSubstring("from $PATH"))
	g.Expect(ready).To(ContainSubstring(`namespaces "no-such-namespace-here" not found`))
	failed := s.Status.History[0]
	if failed.FinishedAt == nil && len(s.Status.History) > 1 {
		failed = s.Status.History[1] // a retry already running
	}
	first, _, _ := strings.Cut(failed.Message, "\n")
	g.Expect(first).To(ContainSubstring("no-such-namespace-here"), "the first line is the problem: %q", failed.Message)
	g.Expect(failed.Message).NotTo(ContainSubstring("from $PATH"))
	for _, e := range stackEvents(t, f.ns, stack.Name) {
		g.Expect(e).NotTo(ContainSubstring("from $PATH"))
	}
}
