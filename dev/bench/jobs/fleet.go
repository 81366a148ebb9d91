package main

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

// fleetNS holds the Stacks applied at once.
const fleetNS = "bench-jobs-fleet"

// runnerSelector selects what the Job executor creates per operation: the
// Job, its Pod and its credential Secret (internal/executor/jobspec.go).
var runnerSelector = client.MatchingLabels{"app.kubernetes.io/component": "runner"}

// runners is what of the Job executor's exists in ns at one moment.
type runners struct {
	jobs, activeJobs, pods, runningPods, secrets int
}

func (w *world) countRunners(ctx context.Context, ns string) (runners, error) {
	var r runners
	var jobs batchv1.JobList
	if err := w.k.List(ctx, &jobs, client.InNamespace(ns), runnerSelector); err != nil {
		return r, err
	}
	r.jobs = len(jobs.Items)
	for _, j := range jobs.Items {
		if j.Status.Active > 0 {
			r.activeJobs++
		}
	}
	var pods corev1.PodList
	if err := w.k.List(ctx, &pods, client.InNamespace(ns), runnerSelector); err != nil {
		return r, err
	}
	r.pods = len(pods.Items)
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
			r.runningPods++
		}
	}
	var secrets corev1.SecretList
	if err := w.k.List(ctx, &secrets, client.InNamespace(ns), runnerSelector); err != nil {
		return r, err
	}
	r.secrets = len(secrets.Items)
	return r, nil
}

// measureFleet creates n Job Stacks at once on a freshly started controller
// and waits until all are Ready; then it checks that the runners are gone.
func (w *world) measureFleet(ctx context.Context, n int, timeout time.Duration) error {
	fmt.Fprintf(w.out, "\n== %d Stacks applying at once as Jobs\n", n)
	// A fresh controller: its VmHWM is then this phase's peak alone.
	if err := w.restartController(ctx); err != nil {
		return err
	}
	limit := w.maxConcurrentJobs()
	if err := w.tenant(ctx, fleetNS); err != nil {
		return err
	}
	commit, err := w.commit("fleet", map[string]string{"app/Pulumi.yaml": benchenv.ConfigMapProgram("fleet", 0, false)}, "fleet")
	if err != nil {
		return err
	}
	idle, err := benchenv.ProcStatus(w.ctrl.Pid())
	if err != nil {
		return err
	}

	cpu := benchenv.TakeCPU()
	t0 := time.Now()
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		if err := w.k.Create(ctx, w.stack(fleetNS, name, "fleet", "app", "cm-"+name, v1alpha1.ExecutorJob)); err != nil {
			return err
		}
	}
	created := time.Since(t0)
	w.logf("%d Stacks created in %s", n, created.Round(10*time.Millisecond))

	var peak runners
	var applied int
	var pgPeak, pgRefused int
	maxConns, _ := w.pg.Query(ctx, "SHOW max_connections")
	lastProgress := time.Now()
	deadline := t0.Add(timeout)
	for {
		r, err := w.countRunners(ctx, fleetNS)
		if err != nil {
			return err
		}
		peak.activeJobs, peak.runningPods, peak.jobs = max(peak.activeJobs, r.activeJobs), max(peak.runningPods, r.runningPods), max(peak.jobs, r.jobs)
		if c, err := w.backendConnections(ctx); err != nil {
			pgRefused++
		} else {
			pgPeak = max(pgPeak, c)
		}
		var notReady []string
		if applied, _, notReady, err = w.countApplied(ctx, fleetNS, commit); err != nil {
			return err
		}
		if applied >= n {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(w.out, "PARTIAL: %d of %d Stacks Ready after %s; for example: %v\n", applied, n, timeout, notReady)
			break
		}
		if time.Since(lastProgress) >= 30*time.Second {
			w.logf("  %d of %d Ready; now %d Jobs (%d active), %d runner Pods Pending or Running", applied, n, r.jobs, r.activeJobs, r.runningPods)
			lastProgress = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	wall := time.Since(t0)
	status, err := benchenv.ProcStatus(w.ctrl.Pid())
	if err != nil {
		return err
	}
	fmt.Fprintf(w.out, "all %d Stacks Ready: %d in %s from the first create (%.1f Stacks/min)\n", n, applied, benchenv.Since(t0), float64(applied)/wall.Minutes())
	fmt.Fprintln(w.out, benchenv.CPUSince(cpu))
	fmt.Fprintln(w.out, "  (the runner Pods' processes run under containerd's shims, outside this process tree: \"everything else\" holds them)")
	fmt.Fprintf(w.out, "controller: peak RSS (VmHWM) %s, RSS now %s; just started %s (VmHWM %s)\n",
		benchenv.MiB(status["VmHWM"]), benchenv.MiB(status["VmRSS"]), benchenv.MiB(idle["VmRSS"]), benchenv.MiB(idle["VmHWM"]))
	fmt.Fprintf(w.out, "--max-concurrent-jobs %s; at most %d Jobs active, %d runner Pods Pending or Running, %d Jobs existing at once (sampled every second)\n",
		limit, peak.activeJobs, peak.runningPods, peak.jobs)
	fmt.Fprintf(w.out, "PostgreSQL: at most %d client connections at once besides the sampler's (max_connections %s; %d samples refused a connection)\n",
		pgPeak, maxConns, pgRefused)
	w.checkFleet(ctx, n, commit, limit, peak)
	return nil
}

// backendConnections is how many clients PostgreSQL serves now, the query's
// own connection not counted.
func (w *world) backendConnections(ctx context.Context) (int, error) {
	out, err := w.pg.Query(ctx, "SELECT count(*) - 1 FROM pg_stat_activity WHERE backend_type = 'client backend'")
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscan(out, &n)
	return n, err
}

// checkFleet prints PASS/FAIL for what must hold after the fleet applied:
// each Stack one succeeded up, the Job limit kept, and nothing of the
// runners left behind (waited for up to two minutes: Jobs go by their TTL
// or the controller's cleanup, and their Pods after them).
func (w *world) checkFleet(ctx context.Context, n int, commit, limit string, peak runners) {
	pass := func(ok bool, format string, args ...any) {
		verdict := "PASS"
		if !ok {
			verdict = "FAIL"
		}
		fmt.Fprintf(w.out, "%s: %s\n", verdict, fmt.Sprintf(format, args...))
	}
	applied, _, notReady, err := w.countApplied(ctx, fleetNS, commit)
	pass(err == nil && applied == n, "all %d Stacks Ready at the commit (%d; %v %v)", n, applied, notReady, err)

	var list v1alpha1.StackList
	ups, other := 0, map[string]int{}
	if err := w.k.List(ctx, &list, client.InNamespace(fleetNS)); err == nil {
		for _, s := range list.Items {
			for _, h := range s.Status.History {
				if h.Type == v1alpha1.OperationUp && h.Outcome == v1alpha1.OutcomeSucceeded {
					ups++
				} else {
					other[fmt.Sprintf("%s %s %s", h.Type, h.Outcome, h.Reason)]++
				}
			}
		}
	}
	pass(ups == n && len(other) == 0, "one succeeded up per Stack in the history (%d succeeded ups; other records: %v)", ups, other)
	for i := range list.Items {
		for _, h := range list.Items[i].Status.History {
			if h.Outcome != v1alpha1.OutcomeSucceeded {
				fmt.Fprintf(w.out, "  %s: %s %s %s: %s\n", list.Items[i].Name, h.Type, h.Outcome, h.Reason, h.Message)
			}
		}
	}
	var max int
	if _, err := fmt.Sscan(limit, &max); err == nil {
		pass(peak.activeJobs <= max, "at most --max-concurrent-jobs (%d) Jobs active at once (seen %d)", max, peak.activeJobs)
	}

	t0 := time.Now()
	var r runners
	for {
		if r, err = w.countRunners(ctx, fleetNS); err != nil {
			pass(false, "list the runners: %v", err)
			return
		}
		if r.jobs+r.pods+r.secrets == 0 || time.Since(t0) > 2*time.Minute || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	gone := benchenv.Since(t0)
	pass(r.jobs == 0, "no runner Job left (%d, %s after all were Ready)", r.jobs, gone)
	pass(r.pods == 0, "no runner Pod left (%d)", r.pods)
	pass(r.secrets == 0, "no per-operation Secret left (%d)", r.secrets)
	var pods corev1.PodList
	if err := w.k.List(ctx, &pods, client.InNamespace(fleetNS)); err == nil {
		pass(len(pods.Items) == 0, "no Pod at all in %s (%d)", fleetNS, len(pods.Items))
	}
}
