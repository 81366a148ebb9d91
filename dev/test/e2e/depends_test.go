package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// dependencyInterval is the interval of the Stacks of the dependency tests:
// long enough that only the watch on Stacks can explain a downstream Stack
// starting soon after its dependency is Ready.
const dependencyInterval = 10 * time.Minute

// maxDependencyGap bounds the time from a dependency's up ending to its
// dependent's up starting: well under the Stacks' interval, and under the
// controller's fallback requeue of a waiting Stack (30 s), so that only the
// watch can meet it.
const maxDependencyGap = 10 * time.Second

// layerProgram is one layer of the chain: a ConfigMap layer-<name> whose data
// says which layer it is, with extraData added.
func layerProgram(name, extraData string) string {
	return `name: ` + name + `
runtime: yaml
config:
  namespace:
    type: string
resources:
  marker:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: layer-` + name + `
        namespace: ${namespace}
      data:
        layer: ` + name + extraData + `
outputs:
  layer: ` + name + `
`
}

// layerStack is a Stack of the program in dir that depends on deps, with the
// long interval and no published outputs.
func (f *fixture) layerStack(name, dir string, deps ...string) *v1alpha1.Stack {
	return f.stack(name, func(s *v1alpha1.Stack) {
		s.Spec.Source.Dir = dir
		s.Spec.Outputs = nil
		s.Spec.Interval = metav1.Duration{Duration: dependencyInterval}
		for _, d := range deps {
			s.Spec.DependsOn = append(s.Spec.DependsOn, v1alpha1.DependencyReference{Name: d})
		}
	})
}

// succeededUp is the newest succeeded up of revision (a commit hash) in the
// Stack's history.
func succeededUp(g Gomega, s *v1alpha1.Stack, revision string) v1alpha1.OperationRecord {
	for _, r := range records(s, v1alpha1.OperationUp) {
		if r.Outcome == v1alpha1.OutcomeSucceeded && strings.HasSuffix(r.Revision, revision) && r.FinishedAt != nil {
			return r
		}
	}
	g.Expect(false).To(BeTrue(), "%s has no succeeded up of %s; history: %+v", s.Name, revision, s.Status.History)
	return v1alpha1.OperationRecord{}
}

// expectStartedAfter checks that down's up of revision started after up's
// up of revision ended, soon after, and logs the gap.
func expectStartedAfter(t *testing.T, down, up *v1alpha1.Stack, revision string) time.Duration {
	t.Helper()
	g := NewWithT(t)
	upRec, downRec := succeededUp(g, up, revision), succeededUp(g, down, revision)
	gap := downRec.StartedAt.Sub(upRec.FinishedAt.Time)
	t.Logf("%s Ready (up ended %s) -> %s up started %s: gap %s (interval %s)",
		up.Name, upRec.FinishedAt.Format(time.RFC3339Nano), down.Name, downRec.StartedAt.Format(time.RFC3339Nano), gap, dependencyInterval)
	g.Expect(gap).To(BeNumerically(">=", 0), "%s started before %s was applied", down.Name, up.Name)
	g.Expect(gap).To(BeNumerically("<", maxDependencyGap), "%s started %s after %s was Ready", down.Name, gap, up.Name)
	return gap
}

// TestDependsOnChain: network -> cluster -> app, three Stacks of one commit
// created together (the last first), apply in that order, each starting
// within seconds of its dependency being Ready. While the cluster Stack
// fails, the app waits (DependencyNotReady) and applies nothing of the new
// commit; once the cluster is fixed, it proceeds on its own.
func TestDependsOnChain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	tree := func(cluster, app string) map[string]string {
		return map[string]string{
			"network/Pulumi.yaml": layerProgram("network", ""),
			"cluster/Pulumi.yaml": cluster,
			"app/Pulumi.yaml":     app,
		}
	}
	first := f.git.Commit(t, "infra", "main", tree(layerProgram("cluster", ""), layerProgram("app", "")), "three layers")
	f.start(t)
	logOnFailure(t, f)

	network := f.layerStack("network", "network")
	cluster := f.layerStack("cluster", "cluster", "network")
	app := f.layerStack("app", "app", "cluster")
	for _, s := range []*v1alpha1.Stack{app, cluster, network} {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	netKey, clusterKey, appKey := client.ObjectKeyFromObject(network), client.ObjectKeyFromObject(cluster), client.ObjectKeyFromObject(app)

	// The app waits for the cluster, which waits for the network.
	g.Eventually(func(g Gomega) {
		s := getStack(g, appKey)
		g.Expect(readyMessage(s)).To(HavePrefix("False/" + v1alpha1.DependencyNotReadyReason + ": dependency cluster"))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	net := waitApplied(t, netKey, first)
	cl := waitApplied(t, clusterKey, first)
	ap := waitApplied(t, appKey, first)
	expectStartedAfter(t, cl, net, first)
	expectStartedAfter(t, ap, cl, first)
	g.Expect(configMapData(g, f.ns, "layer-app")).To(HaveKeyWithValue("layer", "app"))

	// A commit that breaks the cluster's program and changes the app's: the
	// app must not apply its change before the cluster has applied this commit.
	broken := f.git.Commit(t, "infra", "main",
		tree(layerProgram("cluster", "\n        broken: ${doesNotExist}"), layerProgram("app", "\n        version: \"2\"")), "break the cluster")
	requestReconcile(t, netKey)
	requestReconcile(t, clusterKey)
	handled := requestReconcile(t, appKey)
	waitNotReady(t, clusterKey, v1alpha1.ProgramErrorReason)
	waitHandled(t, appKey, handled)
	g.Consistently(func(g Gomega) {
		s := getStack(g, appKey)
		g.Expect(readyMessage(s)).To(HavePrefix("False/"+v1alpha1.DependencyNotReadyReason+": dependency cluster"), "the app waits")
		for _, r := range s.Status.History {
			g.Expect(r.Revision).NotTo(HaveSuffix(broken), "the app ran nothing of the broken commit")
		}
		g.Expect(configMapData(g, f.ns, "layer-app")).NotTo(HaveKey("version"))
	}, 15*time.Second, time.Second).Should(Succeed())
	t.Logf("app while the cluster fails: %s", readyMessage(getStack(g, appKey)))

	// The fix: the cluster applies it, and the app follows without being asked.
	fixed := f.git.Commit(t, "infra", "main",
		tree(layerProgram("cluster", "\n        fixed: \"yes\""), layerProgram("app", "\n        version: \"2\"")), "fix the cluster")
	requestReconcile(t, netKey)
	requestReconcile(t, clusterKey)
	cl = waitApplied(t, clusterKey, fixed)
	ap = waitApplied(t, appKey, fixed)
	expectStartedAfter(t, ap, cl, fixed)
	g.Expect(configMapData(g, f.ns, "layer-app")).To(HaveKeyWithValue("version", "2"))
}

// TestDependsOnCycle: a -> b -> c -> a is Stalled (DependencyCycle) on each
// Stack, naming the cycle from it, and runs nothing; removing one edge lets
// all three apply, each woken by its dependency (the interval is 10 min).
func TestDependsOnCycle(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newDriftFixture(t, tinyProgram)
	f.start(t)
	logOnFailure(t, f)

	stacks := []*v1alpha1.Stack{
		f.layerStack("a", "app", "b"),
		f.layerStack("b", "app", "c"),
		f.layerStack("c", "app", "a"),
	}
	for _, s := range stacks {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	cycles := map[string]string{"a": "a -> b -> c -> a", "b": "b -> c -> a -> b", "c": "c -> a -> b -> c"}
	for _, s := range stacks {
		key := client.ObjectKeyFromObject(s)
		g.Eventually(func(g Gomega) {
			got := getStack(g, key)
			g.Expect(readyMessage(got)).To(HavePrefix("False/" + v1alpha1.DependencyCycleReason))
			g.Expect(readyMessage(got)).To(ContainSubstring(cycles[s.Name]))
			stalled := conditionOf(got, v1alpha1.StalledCondition)
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(stalled.Reason).To(Equal(v1alpha1.DependencyCycleReason))
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		t.Logf("%s: %s", s.Name, readyMessage(getStack(g, key)))
	}
	g.Expect(f.ctrl.Operations(t, "")).To(BeZero(), "no Pulumi run in a cycle")

	patchStack(t, client.ObjectKeyFromObject(stacks[2]), map[string]any{"spec": map[string]any{"dependsOn": nil}})
	for _, s := range []*v1alpha1.Stack{stacks[2], stacks[1], stacks[0]} {
		waitApplied(t, client.ObjectKeyFromObject(s), f.commit)
	}
	c, b, a := getStack(g, client.ObjectKeyFromObject(stacks[2])), getStack(g, client.ObjectKeyFromObject(stacks[1])), getStack(g, client.ObjectKeyFromObject(stacks[0]))
	expectStartedAfter(t, b, c, f.commit)
	expectStartedAfter(t, a, b, f.commit)
}

func conditionOf(s *v1alpha1.Stack, typ string) *metav1.Condition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == typ {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}
