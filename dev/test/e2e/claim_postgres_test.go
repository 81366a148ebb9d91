package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// TestClaimRecheckedOnPostgresBackend (issue 21, item 16): on a backend the
// runner reaches only through the CLI (Pulumi's PostgreSQL DIY backend, on
// a real PostgreSQL server), the claim is three CLI calls, and two Stacks
// claiming one fresh stack at once can both pass it: the tag then names the
// one that set it last. The test makes that outcome directly: Stack first
// applies (and holds its claim), then the tag is set to Stack second, as
// second's interleaved claim would leave it. First's next operation must
// find the tag and change nothing (Stalled/StackClaimed, naming second):
// once a Stack has applied, its claim is still checked at every operation.
func TestClaimRecheckedOnPostgresBackend(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	pg := startPostgres(t)
	backend := pg.URL()
	f := newFixture(t)
	f.start(t)
	logOnFailure(t, f)
	first := f.stack("first", func(s *v1alpha1.Stack) {
		s.Spec.Backend = backend
		s.Spec.StackName = "shared"
		s.Spec.Outputs = nil
	})
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	key := client.ObjectKeyFromObject(first)
	s := waitApplied(t, key, f.commit)
	g.Expect(s.Status.AppliedStack).NotTo(BeNil())
	g.Expect(s.Status.AppliedStack.Backend).To(HavePrefix("postgres://"))
	ref := "organization/bridge/shared"
	tags := map[string]string{}
	g.Expect(json.Unmarshal([]byte(pulumiCLI(t, backend, "stack", "tag", "ls", "--stack", ref, "--json")), &tags)).To(Succeed())
	g.Expect(tags).To(HaveKeyWithValue(runner.OwnerTag, f.ns+"/first"), "the claim is in the backend")

	// The interleaved claim of Stack second set the tag last.
	pulumiCLI(t, backend, "stack", "tag", "set", runner.OwnerTag, f.ns+"/second", "--stack", ref)
	ups := f.ctrl.Operations(t, "up")

	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: big")}, "size")
	requestReconcile(t, key)
	g.Eventually(func(g Gomega) {
		s = getStack(g, key)
		g.Expect(s.Status.CurrentOperation).To(BeNil())
		g.Expect(s.Status.LastAttemptedRevision).To(HaveSuffix(next), "Ready: %s", readyMessage(s))
		g.Expect(conditions.Get(s, v1alpha1.ReadyCondition).Status).NotTo(Equal(metav1.ConditionUnknown))
	}, 4*time.Minute, time.Second).Should(Succeed())
	g.Expect(conditions.GetReason(s, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.StackClaimedReason), "Ready: %s", readyMessage(s))
	g.Expect(conditions.IsStalled(s)).To(BeTrue())
	g.Expect(readyMessage(s)).To(ContainSubstring("belongs to Stack " + f.ns + "/second"))
	g.Expect(readyMessage(s)).NotTo(ContainSubstring(pg.Password), "no credentials of the backend URL")
	g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(f.commit), "the change was not applied")
	g.Expect(configMapData(g, f.ns, "app-settings")).NotTo(HaveKey("size"), "the stack of another Stack is not touched")
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups+1), "one up, refused by its claim check")
	g.Expect(s.Status.History[0].Reason).To(Equal(v1alpha1.StackClaimedReason))
	g.Expect(strings.Count(pulumiCLI(t, backend, "stack", "tag", "ls", "--stack", ref, "--json"), f.ns+"/second")).To(Equal(1), "the winner's claim stays")
}
