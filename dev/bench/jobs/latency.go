package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

// latencyNS holds the two Stacks of the start latency: the same program,
// one Local, one Job.
const latencyNS = "bench-latency"

// side is one of the two Stacks the latency compares.
type side struct {
	executor string
	key      client.ObjectKey
	repo     string
	uid      string
	samples  []sample
}

// sample is one operation, each time from the patch of the Stack's spec.
type sample struct {
	// recorded: status.currentOperation names the new operation (the
	// controller resolved the inputs and recorded the start).
	recorded time.Duration
	// engine: the operation's engine log in the controller's log store has
	// its first byte (Pulumi printed its first line; for a Job, shipped).
	engine time.Duration
	// ready: the Stack is Ready at the new revision (the operation ended
	// and its end is in status).
	ready time.Duration
	// Job only: podSeen, the operation's runner Pod exists (the controller
	// made the Job, the Job controller its Pod); podRunning, the kubelet
	// reported it Running (the init container copied the runner, the
	// runner container started; the kubelet reports with some lag).
	podSeen, podRunning time.Duration
	// slowestPoll is the longest round of observations (log dir, Pods,
	// Stack): how late a moment may be seen at most.
	slowestPoll time.Duration
}

// measureLatency applies the same trivial Stack n times with each executor,
// alternating, after one warm-up apply each (the Job's pulls the images).
func (w *world) measureLatency(ctx context.Context, n int, timeout time.Duration) error {
	fmt.Fprintf(w.out, "\n== start latency: the same one-ConfigMap Stack, Local and Job, %d operations each, alternating\n", n)
	if err := w.tenant(ctx, latencyNS); err != nil {
		return err
	}
	sides := []*side{
		{executor: v1alpha1.ExecutorLocal, key: client.ObjectKey{Namespace: latencyNS, Name: "local"}, repo: "local"},
		{executor: v1alpha1.ExecutorJob, key: client.ObjectKey{Namespace: latencyNS, Name: "job"}, repo: "job"},
	}
	for _, sd := range sides {
		t0 := time.Now()
		commit, err := w.commit(sd.repo, map[string]string{"app/Pulumi.yaml": latencyProgram}, "latency")
		if err != nil {
			return err
		}
		s := w.stack(latencyNS, sd.key.Name, sd.repo, "app", "settings-"+sd.key.Name, sd.executor)
		s.Spec.Config["run"] = apiextensionsv1.JSON{Raw: []byte(`"run-0"`)}
		if err := w.k.Create(ctx, s); err != nil {
			return err
		}
		sd.uid = string(s.UID)
		if err := w.waitFirstApply(ctx, sd.key, commit, timeout); err != nil {
			return err
		}
		w.logf("warm-up: %s Stack created to Ready (first apply%s) in %s", sd.executor, map[bool]string{true: ", images pulled into the node", false: ""}[sd.executor == v1alpha1.ExecutorJob], benchenv.Since(t0))
	}

	cpu := benchenv.TakeCPU()
	for i := 1; i <= n; i++ {
		for _, sd := range sides {
			smp, err := w.timeOne(ctx, sd, i, timeout)
			if err != nil {
				return err
			}
			sd.samples = append(sd.samples, smp)
			pod := ""
			if sd.executor == v1alpha1.ExecutorJob {
				pod = fmt.Sprintf(", Pod seen %s, Running %s", benchenv.Seconds(smp.podSeen), benchenv.Seconds(smp.podRunning))
			}
			w.logf("run %d %-5s recorded %s%s, engine log %s, Ready %s (slowest poll %s)", i, sd.executor,
				benchenv.Seconds(smp.recorded), pod, benchenv.Seconds(smp.engine), benchenv.Seconds(smp.ready), benchenv.Seconds(smp.slowestPoll))
		}
	}
	printLatency(w, sides)
	fmt.Fprintln(w.out, benchenv.CPUSince(cpu))
	fmt.Fprintln(w.out, "  (the runner Pods' processes run under containerd's shims, outside this process tree: \"everything else\" holds them)")
	return nil
}

// latencyProgram is one ConfigMap whose data is the config value run: a
// run changes the Stack's spec, not its source. A new commit would race
// with the reconcile the end of the previous Job brings (the Stack owns its
// Jobs), which finds the commit before the request does, and the times
// would start late.
const latencyProgram = `name: latency
runtime: yaml
config:
  namespace:
    type: string
  configMapName:
    type: string
  run:
    type: string
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: ${configMapName}
        namespace: ${namespace}
      data:
        run: ${run}
outputs:
  configMap: ${settings.metadata.name}
`

// timeOne patches the Stack's config value run (the ConfigMap's data) and
// polls every 50 ms for the moments of a sample.
func (w *world) timeOne(ctx context.Context, sd *side, run int, timeout time.Duration) (sample, error) {
	logDir := filepath.Join(w.ctrlCfg.DataDir, "logs", sd.uid)
	before := logFiles(logDir)
	old := &v1alpha1.Stack{}
	if err := w.k.Get(ctx, sd.key, old); err != nil {
		return sample{}, err
	}
	known := map[string]bool{}
	for _, h := range old.Status.History {
		known[h.ID] = true
	}
	oldPods, err := w.runnerPods(ctx, sd.key.Namespace)
	if err != nil {
		return sample{}, err
	}

	// Not a bare number: the YAML host would read "1" as a number, and
	// the ConfigMap's data takes strings only.
	patch := fmt.Sprintf(`{"spec":{"config":{"run":"run-%d"}}}`, run)
	patched := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: sd.key.Namespace, Name: sd.key.Name}}
	t0 := time.Now()
	if err := w.k.Patch(ctx, patched, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return sample{}, err
	}
	var smp sample
	deadline := t0.Add(timeout)
	// Each moment is the time its observation returned: an upper bound,
	// late by at most that call's latency (slowestPoll says how late).
	for {
		iteration := time.Now()
		if smp.engine == 0 {
			files := logFiles(logDir)
			now := time.Now()
			for name, size := range files {
				if _, ok := before[name]; !ok && size > 0 {
					smp.engine = now.Sub(t0)
				}
			}
		}
		if sd.executor == v1alpha1.ExecutorJob && smp.podRunning == 0 {
			pods, err := w.runnerPods(ctx, sd.key.Namespace)
			if err != nil {
				return smp, err
			}
			now := time.Now()
			for name, phase := range pods {
				if _, ok := oldPods[name]; ok {
					continue
				}
				if smp.podSeen == 0 {
					smp.podSeen = now.Sub(t0)
				}
				if phase != corev1.PodPending {
					smp.podRunning = now.Sub(t0)
				}
			}
		}
		s := &v1alpha1.Stack{}
		if err := w.k.Get(ctx, sd.key, s); err != nil {
			return smp, err
		}
		now := time.Now()
		smp.slowestPoll = max(smp.slowestPoll, now.Sub(iteration))
		if h := s.Status.History; len(h) > 0 && !known[h[0].ID] && h[0].Outcome != v1alpha1.OutcomeRunning && h[0].Outcome != v1alpha1.OutcomeSucceeded {
			return smp, fmt.Errorf("%s run %d: %s %s: %s", sd.key, run, h[0].ID, h[0].Outcome, h[0].Message)
		}
		if smp.recorded == 0 && (s.Status.CurrentOperation != nil && !known[s.Status.CurrentOperation.ID] ||
			len(s.Status.History) > 0 && !known[s.Status.History[0].ID]) {
			smp.recorded = now.Sub(t0)
		}
		if benchenv.Applied(s, "") && s.Status.ObservedGeneration >= patched.Generation {
			smp.ready = now.Sub(t0)
			if len(s.Status.History) == 0 || known[s.Status.History[0].ID] || s.Status.History[0].Outcome != v1alpha1.OutcomeSucceeded {
				return smp, fmt.Errorf("%s run %d: Ready at generation %d without a new succeeded operation in its history", sd.key, run, patched.Generation)
			}
			if smp.engine == 0 {
				return smp, fmt.Errorf("%s run %d: no engine log appeared under %s", sd.key, run, logDir)
			}
			return smp, nil
		}
		if now.After(deadline) {
			return smp, fmt.Errorf("%s run %d: not Ready at generation %d within %s: %s", sd.key, run, patched.Generation, timeout, benchenv.ReadyMessage(s))
		}
		select {
		case <-ctx.Done():
			return smp, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runnerPods is the runner Pods in ns by name, with their phases.
func (w *world) runnerPods(ctx context.Context, ns string) (map[string]corev1.PodPhase, error) {
	var pods corev1.PodList
	if err := w.k.List(ctx, &pods, client.InNamespace(ns), runnerSelector); err != nil {
		return nil, err
	}
	out := map[string]corev1.PodPhase{}
	for _, p := range pods.Items {
		out[p.Name] = p.Status.Phase
	}
	return out, nil
}

// waitFirstApply waits until the Stack is Ready at commit, and gives up
// at its first failed operation: the warm-up has to succeed.
func (w *world) waitFirstApply(ctx context.Context, key client.ObjectKey, commit string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		s := &v1alpha1.Stack{}
		if err := w.k.Get(ctx, key, s); err != nil {
			return err
		}
		if benchenv.Applied(s, commit) {
			return nil
		}
		for _, h := range s.Status.History {
			if h.Outcome != v1alpha1.OutcomeRunning && h.Outcome != v1alpha1.OutcomeSucceeded {
				return fmt.Errorf("%s: the first apply's %s %s: %s", key, h.ID, h.Outcome, h.Message)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not Ready within %s: %s", key, timeout, benchenv.ReadyMessage(s))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logFiles is the engine logs of one Stack in the controller's log store,
// by name, with their sizes.
func logFiles(dir string) map[string]int64 {
	out := map[string]int64{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			out[e.Name()] = info.Size()
		}
	}
	return out
}

func printLatency(w *world, sides []*side) {
	fmt.Fprintf(w.out, "\n%-8s %5s %10s %10s %12s %11s %8s\n", "executor", "runs", "recorded", "Pod seen", "Pod Running", "engine log", "Ready")
	med := map[string][3]time.Duration{}
	for _, sd := range sides {
		var rec, seen, running, eng, rdy []time.Duration
		for _, s := range sd.samples {
			rec, eng, rdy = append(rec, s.recorded), append(eng, s.engine), append(rdy, s.ready)
			seen, running = append(seen, s.podSeen), append(running, s.podRunning)
		}
		m := [3]time.Duration{benchenv.Median(rec), benchenv.Median(eng), benchenv.Median(rdy)}
		med[sd.executor] = m
		podSeen, podRunning := "-", "-"
		if sd.executor == v1alpha1.ExecutorJob {
			podSeen, podRunning = benchenv.Seconds(benchenv.Median(seen)), benchenv.Seconds(benchenv.Median(running))
		}
		fmt.Fprintf(w.out, "%-8s %5d %10s %10s %12s %11s %8s   (medians; from the spec's patch)\n", sd.executor, len(sd.samples),
			benchenv.Seconds(m[0]), podSeen, podRunning, benchenv.Seconds(m[1]), benchenv.Seconds(m[2]))
	}
	l, j := med[v1alpha1.ExecutorLocal], med[v1alpha1.ExecutorJob]
	const target = 2 * time.Second
	verdict := func(d time.Duration) string {
		if d <= target {
			return "within"
		}
		return "over"
	}
	fmt.Fprintf(w.out, "Job - Local, medians: to the engine log's first line %+.2fs, to Ready %+.2fs (target: the Job adds at most %s: %s, %s)\n",
		(j[1] - l[1]).Seconds(), (j[2] - l[2]).Seconds(), target, verdict(j[1]-l[1]), verdict(j[2]-l[2]))
	if l[2] > 0 {
		fmt.Fprintf(w.out, "ratio Job / Local to Ready: %.2fx\n", j[2].Seconds()/l[2].Seconds())
	}
	fmt.Fprintln(w.out, "  recorded: status.currentOperation names the new operation (ls-remote, inputs resolved, start recorded);")
	fmt.Fprintln(w.out, "  Pod seen / Running: the runner Pod exists / the kubelet reports it Running (init container done, runner started);")
	fmt.Fprintln(w.out, "  engine log: its first byte in the controller's log store (Local: written by the runner as Pulumi prints;")
	fmt.Fprintln(w.out, "  Job: shipped by the Pod every second, so up to 1 s after Pulumi printed it); Ready: at the patched generation.")
}
