package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

const (
	shardKey      = "sharding.fluxcd.io/key"
	shard1        = shardKey + " in (shard1)" // canonical: OperationRecord.Shard holds it so
	mainShard     = "!" + shardKey
	shardedStacks = 20
)

// shardPrograms is the tree of the sharding test at one generation: app (no
// resources), down (reads an upstream's output) and gated (a ConfigMap whose
// data it reads from the file gate on the controller's host: an up of it
// blocks while gate is a FIFO no one writes, so the test holds it for as long
// as it likes; the label proceed comes from config, a change to make).
func shardPrograms(generation, gate string) map[string]string {
	return map[string]string{
		"app/Pulumi.yaml": `name: app
runtime: yaml
config:
  namespace:
    type: string
outputs:
  namespace: ${namespace}
  generation: ` + generation + `
`,
		"down/Pulumi.yaml": `name: down
runtime: yaml
config:
  namespace:
    type: string
  upstream:
    type: string
outputs:
  upstream: ${upstream}
  generation: ` + generation + `
`,
		"gated/Pulumi.yaml": `name: gated
runtime: yaml
config:
  namespace:
    type: string
  proceed:
    type: string
    default: "yes"
resources:
  gate:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: gate
        namespace: ${namespace}
        labels:
          proceed: ${proceed}
      data:
        generation: ` + generation + `
        gate:
          fn::readFile: ` + gate + `
outputs:
  generation: ` + generation + `
`,
	}
}

// TestSharding: two controllers with disjoint --watch-label-selector share
// one namespace and 20 Stacks. Each Stack is operated by exactly one of
// them (the per-controller operation counts, and the shard in each
// record); a Stack of one shard depends on, and reads the outputs of, a
// Stack of the other; one Receiver's push reaches the Stacks of both
// shards; and a Stack relabelled while its up runs is left to the old shard
// until that up ends, then served by the new one without a second up.
func TestSharding(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	gate := filepath.Join(t.TempDir(), "gate")
	g.Expect(os.WriteFile(gate, []byte("open"), 0o644)).To(Succeed())
	first := f.git.Commit(t, "infra", "main", shardPrograms("one", gate), "three programs")
	// The shards share the state backend (and, being in one namespace, the
	// digest key): a Stack's stack is the same whichever shard runs it. It
	// has a directory per Stack, as a large fleet on a file backend needs.
	state := filepath.Join(t.TempDir(), "state")
	backend := "--default-backend=file://" + state + "/{namespace}/{name}"
	one := startController(t, f.ns, filepath.Join(f.dataDir, "shard1"), "--watch-label-selector="+shard1, backend)
	main := startController(t, f.ns, filepath.Join(f.dataDir, "main"), "--watch-label-selector="+mainShard, backend)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shard1 log (last 40 lines):\n%s", testenv.TailFile(one.LogPath, 40))
			t.Logf("main log (last 40 lines):\n%s", testenv.TailFile(main.LogPath, 40))
		}
	})

	// Even Stacks in shard1, odd ones in the main shard. s00 (shard1)
	// depends on s01 (main) and reads its output; s02 (shard1) is gated;
	// s04 (shard1) depends on s05 (main).
	shardOf := map[string]string{}
	var keys []client.ObjectKey
	for i := range shardedStacks {
		name := fmt.Sprintf("s%02d", i)
		s := f.stack(name, func(s *v1alpha1.Stack) { s.Spec.Outputs = nil })
		shardOf[name] = mainShard
		if i%2 == 0 {
			s.Labels = map[string]string{shardKey: "shard1"}
			shardOf[name] = shard1
		}
		switch name {
		case "s00":
			s.Spec.Source.Dir = "down"
			s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "s01"}}
			s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{
				Name: "s01", Keys: []v1alpha1.OutputKey{{Output: "namespace", As: "upstream"}}}}}
		case "s01":
			s.Spec.Outputs = &v1alpha1.OutputsTarget{SecretName: "s01-outputs"}
		case "s02":
			s.Spec.Source.Dir = "gated"
		case "s04":
			s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "s05"}}
		}
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
		keys = append(keys, client.ObjectKeyFromObject(s))
	}

	// upsBy checks that every Stack applied revision, each with exactly one
	// up of it, recorded by its own shard.
	upsBy := func(revision string) {
		t.Helper()
		for _, key := range keys {
			s := waitApplied(t, key, revision)
			var ups []v1alpha1.OperationRecord
			for _, r := range records(s, v1alpha1.OperationUp) {
				if r.Revision == s.Status.LastAppliedRevision {
					ups = append(ups, r)
				}
			}
			g.Expect(ups).To(HaveLen(1), "%s: one up of %s; history %+v", key.Name, revision, s.Status.History)
			g.Expect(ups[0].Shard).To(Equal(shardOf[key.Name]), "%s was operated by its own shard", key.Name)
		}
	}
	upsBy(first)
	for _, key := range keys { // --default-backend's {name}: each Stack's state in a directory of its own
		s := getStack(g, key)
		g.Expect(s.Status.AppliedStack.Backend).To(Equal("file://" + filepath.Join(state, key.Namespace, key.Name)))
		stacks, err := filepath.Glob(filepath.Join(state, key.Namespace, key.Name, ".pulumi", "stacks", "*", "*.json"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stacks).To(HaveLen(1), "%s's state directory holds its stack alone", key.Name)
	}
	g.Expect(one.Operations(t, "up")).To(Equal(shardedStacks/2), "shard1 ran the ups of its Stacks alone")
	g.Expect(main.Operations(t, "up")).To(Equal(shardedStacks/2), "the main shard ran the ups of its Stacks alone")
	down := getStack(g, keys[0])
	g.Expect(down.Status.Outputs).To(HaveKeyWithValue("upstream", `"`+f.ns+`"`), "s00 read s01's output across shards")

	// A push to the Receiver (served by the main shard: it has no shard
	// label) reaches the Stacks of both shards.
	url := createReceiver(t, f.ns, main, "github", v1alpha1.GitHubReceiver)
	second := f.git.Commit(t, "infra", "main", shardPrograms("two", gate), "second generation")
	res := postGitHub(t, url, githubPush(f.repoURL, "main", second), webhookToken, "shard-push-1")
	g.Expect(res.Code).To(Equal(http.StatusOK), "%+v", res)
	g.Expect(res.Outcome).To(Equal("accepted"))
	g.Expect(res.Stacks).To(Equal(shardedStacks), "the push matched the Stacks of both shards")
	upsBy(second)
	g.Expect(one.Operations(t, "up")).To(Equal(shardedStacks))
	g.Expect(main.Operations(t, "up")).To(Equal(shardedStacks))

	// Relabel s02 while shard1 runs its up, held reading the gate (now a
	// FIFO): the main shard waits for it, shard1 records its end, and the
	// main shard then serves the Stack without a second up. (The provider's
	// pulumi.com/waitFor held it before, and once let an in-place update
	// through under load: the up ended before the relabel.)
	gatedKey := keys[2]
	g.Expect(os.Remove(gate)).To(Succeed())
	g.Expect(syscall.Mkfifo(gate, 0o644)).To(Succeed())
	patchStack(t, gatedKey, map[string]any{"spec": map[string]any{"config": map[string]any{"proceed": "no"}}})
	var held v1alpha1.OperationRecord
	var opener *os.File // the gate's write end, held open until the gate opens
	t.Cleanup(func() {
		if opener != nil {
			_ = opener.Close()
		}
	})
	g.Eventually(func(g Gomega) {
		s := getStack(g, gatedKey)
		g.Expect(s.Status.CurrentOperation).NotTo(BeNil())
		g.Expect(s.Status.CurrentOperation.Type).To(Equal(v1alpha1.OperationUp))
		held = *s.Status.CurrentOperation
		// Opening a FIFO's write end without blocking works only once a
		// reader has it open: the up's program is reading the gate.
		w, err := os.OpenFile(gate, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		g.Expect(err).NotTo(HaveOccurred(), "the up reads the gate")
		opener = w
	}, 4*time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Expect(held.Shard).To(Equal(shard1))
	g.Expect(env.Client.Patch(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: gatedKey.Name, Namespace: f.ns}},
		client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/labels/sharding.fluxcd.io~1key"}]`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := getStack(g, gatedKey)
		c := conditions.Get(s, v1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.ShardHandoffReason), "Ready: %s", readyMessage(s))
		g.Expect(s.Status.CurrentOperation).NotTo(BeNil())
		g.Expect(s.Status.CurrentOperation.ID).To(Equal(held.ID), "the main shard started no up of its own")
	}, 4*time.Minute, 500*time.Millisecond).Should(Succeed())
	mainUps := main.Operations(t, "up")
	g.Expect(mainUps).To(Equal(shardedStacks))
	// Open the gate: shard1's up ends, and shard1 records it. A regular file
	// takes the FIFO's place first, for every later read of the program.
	g.Expect(os.WriteFile(gate+".new", []byte("open"), 0o644)).To(Succeed())
	g.Expect(os.Rename(gate+".new", gate)).To(Succeed())
	_, err := opener.WriteString("open")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opener.Close()).To(Succeed())
	opener = nil
	g.Eventually(func(g Gomega) {
		s := getStack(g, gatedKey)
		g.Expect(s.Status.CurrentOperation).To(BeNil())
		g.Expect(s.Status.History[0].ID).To(Equal(held.ID))
		g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "history %+v", s.Status.History)
	}, 4*time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Expect(one.Operations(t, "up")).To(Equal(shardedStacks + 1))

	// The main shard serves it now: a reconcile it alone sees handled, with
	// nothing to apply (no second up of that change)...
	handled := waitHandled(t, gatedKey, requestReconcile(t, gatedKey))
	g.Expect(conditions.IsReady(handled)).To(BeTrue(), "Ready: %s", readyMessage(handled))
	g.Expect(main.Operations(t, "up")).To(Equal(mainUps), "the main shard ran no second up of the handed-over change")
	var ups int
	for _, r := range records(handled, v1alpha1.OperationUp) {
		if r.Revision == handled.Status.LastAppliedRevision {
			ups++
		}
	}
	g.Expect(ups).To(Equal(2), "s02's ups at the second revision: the push's and proceed=no's, no third: %+v", handled.Status.History)
	// ...and the next change of it is the main shard's.
	patchStack(t, gatedKey, map[string]any{"spec": map[string]any{"config": map[string]any{"proceed": "yes"}}})
	g.Eventually(func(g Gomega) {
		s := getStack(g, gatedKey)
		g.Expect(conditions.IsReady(s)).To(BeTrue(), "Ready: %s", readyMessage(s))
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.History[0].Type).To(Equal(v1alpha1.OperationUp))
		g.Expect(s.Status.History[0].Shard).To(Equal(mainShard))
	}, 4*time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Expect(main.Operations(t, "up")).To(Equal(mainUps + 1))
	g.Expect(one.Operations(t, "up")).To(Equal(shardedStacks+1), "shard1 no longer acts on s02")

	// stackpilot get stacks shows each Stack's shard.
	out, errOut, code := mustPlanCLI(t, f.ns, "get", "stacks")
	g.Expect(code).To(Equal(0), errOut)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	g.Expect(rows).To(HaveLen(shardedStacks + 1))
	g.Expect(strings.Fields(rows[0])).To(HaveExactElements("NAME", "READY", "STATUS", "REVISION", "SUSPENDED", "AGE", "SHARD"))
	for _, row := range rows[1:] {
		cells := strings.Fields(row)
		want := "-"
		if shardOf[cells[0]] == shard1 && cells[0] != "s02" {
			want = "shard1"
		}
		g.Expect(cells[len(cells)-1]).To(Equal(want), row)
	}
	out, errOut, code = mustPlanCLI(t, f.ns, "get", "stacks", "s00", "-o", "json")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring(`"shard": "shard1"`))

	// A change of a Stack in another shard wakes the Stacks that depend on
	// it: s05 (main) goes, and s04 (shard1, Ready, its interval an hour
	// away, nothing else of it changing) says so.
	g.Expect(conditions.IsReady(getStack(g, keys[4]))).To(BeTrue())
	g.Expect(env.Client.Delete(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s05", Namespace: f.ns}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := getStack(g, keys[4])
		g.Expect(readyMessage(s)).To(HavePrefix("False/"+v1alpha1.DependencyNotReadyReason+": dependency s05"), "s04 was woken by s05's deletion")
	}, 4*time.Minute, time.Second).Should(Succeed())
}
