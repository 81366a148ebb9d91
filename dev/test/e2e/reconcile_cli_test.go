package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// chainProgram is the bridge program plus n ConfigMaps created one after
// another (each depends on the one before): an up that takes some seconds,
// long enough for the controller to show its counts while it runs.
func chainProgram(n int) string {
	var b strings.Builder
	b.WriteString(bridgeProgram(""))
	prog := b.String()
	i := strings.Index(prog, "outputs:\n")
	var res strings.Builder
	for k := 0; k < n; k++ {
		fmt.Fprintf(&res, "  link%d:\n    type: kubernetes:core/v1:ConfigMap\n    properties:\n      metadata:\n        name: link-%d\n        namespace: ${namespace}\n      data:\n        n: \"%d\"\n", k, k, k)
		if k > 0 {
			fmt.Fprintf(&res, "    options:\n      dependsOn:\n        - ${link%d}\n", k-1)
		}
	}
	return prog[:i] + res.String() + prog[i:]
}

// TestReconcileCLI: `stackpilot reconcile` asks for a reconcile, follows the
// operation with its counts so far and returns when the new revision is
// applied; it fails with the Stack's message when the revision cannot be;
// suspend and resume steer spec.suspend, and resume --wait follows the
// reconcile it asks for.
func TestReconcileCLI(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	s := f.stack("steer")
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	key := client.ObjectKeyFromObject(s)
	waitApplied(t, key, f.commit)

	// A new revision that takes a while: reconcile returns once it is applied
	// and shows the counts while the up runs.
	const links = 150
	slow := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": chainProgram(links)}, "chain")
	out, errOut, code := mustPlanCLI(t, f.ns, "reconcile", s.Name, "--timeout", "4m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(Equal(fmt.Sprintf("Stack %s/steer reconciled: %s (revision main@sha1:%s)\n",
		f.ns, readyText(getStack(g, key)), slow)))
	g.Expect(errOut).To(HavePrefix(fmt.Sprintf("Requested a reconcile of Stack %s/steer; waiting up to ", f.ns)))
	// Not a terminal: one line per change of the counts, never a carriage return.
	g.Expect(errOut).NotTo(ContainSubstring("\r"))
	g.Expect(errOut).To(MatchRegexp(`(?m)^up \S+: ([1-9]\d*) created, 0 updated, 0 deleted \(\d+s\)$`),
		"no progress line with counts:\n%s", errOut)
	g.Expect(errOut).To(MatchRegexp(`(?m)^up \S+ succeeded: `), "the operation the request ran")
	var counts []int
	for _, m := range regexp.MustCompile(`(?m)^up \S+: (\d+) created`).FindAllStringSubmatch(errOut, -1) {
		var n int
		fmt.Sscan(m[1], &n)
		counts = append(counts, n)
	}
	for i := 1; i < len(counts); i++ {
		g.Expect(counts[i]).To(BeNumerically(">", counts[i-1]), "each line is a change, counts only grow: %v", counts)
	}
	g.Expect(counts).NotTo(BeEmpty())
	g.Expect(counts[len(counts)-1]).To(BeNumerically("<=", links))
	g.Expect(configMapData(g, f.ns, fmt.Sprintf("link-%d", links-1))).To(HaveKeyWithValue("n", fmt.Sprint(links-1)))
	applied := getStack(g, key)
	g.Expect(applied.Status.LastAppliedRevision).To(HaveSuffix(slow))
	g.Expect(applied.Status.CurrentOperation).To(BeNil())

	// A revision that cannot be applied: exit 1 with the Stack's message.
	f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": "name: bridge\nruntime: yaml\nresources:\n  bad:\n    type: kubernetes:core/v1:NoSuchKind\n"}, "broken")
	out, errOut, code = mustPlanCLI(t, f.ns, "reconcile", s.Name, "--timeout", "4m")
	g.Expect(code).To(Equal(1), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(out).To(BeEmpty())
	broken := getStack(g, key)
	g.Expect(conditionsReady(broken)).To(BeFalse())
	g.Expect(errOut).To(ContainSubstring(fmt.Sprintf("stackpilot: Stack %s/steer is not Ready (%s): %s\n",
		f.ns, readyReason(broken), readyText(broken))))
	g.Expect(readyText(broken)).NotTo(BeEmpty())

	// Suspend, then a good program: reconcile refuses and says how on, and
	// nothing is applied until resume.
	out, errOut, code = mustPlanCLI(t, f.ns, "suspend", s.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out + errOut).To(ContainSubstring("steer"))
	g.Expect(getStack(g, key).Spec.Suspend).To(BeTrue())
	fixed := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: small")}, "fixed")
	_, errOut, code = mustPlanCLI(t, f.ns, "reconcile", s.Name)
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring(fmt.Sprintf("resume it with `stackpilot resume steer -n %s`", f.ns)))
	g.Consistently(func() string { return getStack(g, key).Status.LastAppliedRevision }, 3*time.Second, time.Second).
		Should(HaveSuffix(slow), "a suspended Stack applies nothing")

	out, errOut, code = mustPlanCLI(t, f.ns, "resume", s.Name, "--timeout", "4m")
	g.Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
	g.Expect(errOut).To(HavePrefix(fmt.Sprintf("Resumed Stack %s/steer\n", f.ns)))
	g.Expect(out).To(HaveSuffix(fmt.Sprintf("(revision main@sha1:%s)\n", fixed)))
	resumed := getStack(g, key)
	g.Expect(resumed.Spec.Suspend).To(BeFalse())
	g.Expect(resumed.Status.LastAppliedRevision).To(HaveSuffix(fixed))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "small"))

	// Every write was the CLI's, under its field manager.
	var managers []string
	for _, m := range resumed.ManagedFields {
		managers = append(managers, m.Manager)
	}
	g.Expect(managers).To(ContainElement("stackpilot"))
}

func conditionsReady(s *v1alpha1.Stack) bool {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.ReadyCondition {
			return c.Status == "True"
		}
	}
	return false
}

func readyReason(s *v1alpha1.Stack) string {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.ReadyCondition {
			return c.Reason
		}
	}
	return ""
}

// readyText is the Ready condition's message alone.
func readyText(s *v1alpha1.Stack) string {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.ReadyCondition {
			return c.Message
		}
	}
	return ""
}
