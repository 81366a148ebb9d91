// Command fleet measures Stackpilot with many Stacks: n trivial Stacks (one
// ConfigMap each, all from one program folder, each named by its own config)
// are created at once and applied; then one commit changes all of them, and
// the time until all are Ready at it is compared with a floor: the CPU a bare
// `pulumi up` of one such change needs (median of 5, user+system CPU of the
// whole pulumi process tree from wait4's rusage) times n, divided by the cores.
// It also reports the controller's own share of the CPU used in that phase,
// its peak RSS, and its RSS after the Stacks have been idle for a while.
//
// The Stacks' interval is long (24h) so that nothing but the commit runs; the
// commit reaches them as a webhook receiver would, by the reconcile-now
// annotation on each.
//
//	go -C dev run ./bench/fleet [-n 1000] [-concurrent-operations 0] [-timeout 30m] [-idle 1m] [-v] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

const (
	namespace = "bench-fleet"
	project   = "fleet"
	repo      = "fleet"
	branch    = "main"
	dir       = "app"
)

type options struct {
	n           int
	concurrency int
	timeout     time.Duration
	idle        time.Duration
	interval    time.Duration
	floorRuns   int
	verbose     bool
	keep        bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	flag.IntVar(&o.n, "n", 1000, "Number of Stacks.")
	flag.IntVar(&o.concurrency, "concurrent-operations", 0, "The controller's --concurrent-operations (0: its default).")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "Bound on each phase's wait: all Stacks created and Ready, then all Ready at the commit.")
	flag.DurationVar(&o.idle, "idle", time.Minute, "How long the Stacks stay idle before their RSS is read.")
	flag.DurationVar(&o.interval, "interval", 24*time.Hour, "The Stacks' spec.interval: long, so that nothing else runs.")
	flag.IntVar(&o.floorRuns, "floor-runs", 5, "Bare `pulumi up` runs whose median CPU makes the floor.")
	flag.BoolVar(&o.verbose, "v", false, "Copy the controller's log to stderr.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/fleet:", err)
		os.Exit(1)
	}
}

func config(i int) map[string]any {
	return map[string]any{
		"namespace":                         namespace,
		"configMapName":                     fmt.Sprintf("fleet-%04d", i),
		"kubernetes:enableConfigMapMutable": true,
	}
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "fleet", fmt.Sprintf("fleet: %d Stacks, one commit that changes all of them, against the bare-pulumi CPU floor", o.n), os.Stdout)
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, o.keep
	if o.n <= 200 {
		e.Poll = 500 * time.Millisecond // finer times for small runs; listing 1,000 Stacks every 2s is enough
	}
	defer e.Close()
	if err := e.Namespace(ctx, namespace); err != nil {
		return err
	}
	cores := runtime.NumCPU()

	// The floor, before the controller runs, so that nothing competes with it.
	floorCPU, floorWall, err := measureFloor(ctx, e, o)
	if err != nil {
		return err
	}
	e.Logf("bare pulumi up of one change: median CPU %s (wall %s) over %d runs; floor for %d Stacks on %d cores: %s",
		benchenv.Seconds(floorCPU), benchenv.Seconds(floorWall), o.floorRuns, o.n, cores,
		time.Duration(float64(floorCPU)*float64(o.n)/float64(cores)).Round(time.Second))

	// The controller and n Stacks, created at once.
	commit0, err := e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": benchenv.ConfigMapProgram(project, 0, false)}, "run 0")
	if err != nil {
		return err
	}
	wrap, err := e.NewWrapper(ctx, "wrap")
	if err != nil {
		return err
	}
	ctrl, err := e.StartController(ctx, namespace, append(benchenv.PulumiArgs(wrap), benchenv.ConcurrencyArgs(o.concurrency)...)...)
	if err != nil {
		return err
	}
	base, err := ctrl.Memory()
	if err != nil {
		return err
	}
	e.Logf("controller with no Stacks: %s", base)

	createCPU := benchenv.TakeCPU()
	t0 := time.Now()
	for i := range o.n {
		s, err := benchenv.StackSpec{
			Namespace: namespace, Name: fmt.Sprintf("fleet-%04d", i),
			URL: e.Git.URL(repo), Branch: branch, Dir: dir,
			Interval: o.interval, Config: config(i),
		}.Stack()
		if err != nil {
			return err
		}
		if err := e.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("create Stack %d: %w", i, err)
		}
	}
	e.Logf("created %d Stacks in %s; waiting for all to be Ready (first apply, at most %s)", o.n, benchenv.Since(t0), o.timeout)
	m, waitErr := waitAll(ctx, e, ctrl, o, commit0, o.n, t0, "first apply")
	createTime := time.Since(t0)
	partial1 := waitErr != nil
	var names []string
	if partial1 {
		// Measure with the Stacks that made it: the others are suspended.
		if ctx.Err() != nil || m == 0 {
			return waitErr
		}
		e.Logf("%v; suspending the others and waiting 30s for operations in flight", waitErr)
		names, err = e.SettleApplied(ctx, namespace, commit0)
	} else {
		names, err = e.AppliedNames(ctx, namespace, commit0)
	}
	if err != nil {
		return err
	}
	m = len(names)
	createCPULine := benchenv.CPUSince(createCPU)
	e.Logf("%d/%d Ready in %s (first apply)", m, o.n, createTime.Round(time.Second))
	floor := time.Duration(float64(floorCPU) * float64(m) / float64(cores))

	// One commit that changes all of them.
	calls0, err := wrap.Count()
	if err != nil {
		return err
	}
	ops0, _, err := ctrl.Counters()
	if err != nil {
		return err
	}
	ctrlCPU0, err := benchenv.ProcCPU(ctrl.Pid())
	if err != nil {
		return err
	}
	cpu := benchenv.TakeCPU()
	t1 := time.Now()
	commit1, err := e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": benchenv.ConfigMapProgram(project, 1, false)}, "run 1: every ConfigMap changes")
	if err != nil {
		return err
	}
	if err := e.RequestAll(ctx, namespace, names, 8); err != nil {
		return err
	}
	e.Logf("committed %s and requested a reconcile of all %d Stacks in %s", commit1[:12], m, benchenv.Since(t1))
	k, err := waitAll(ctx, e, ctrl, o, commit1, m, t1, "the commit")
	commitTime := time.Since(t1)
	partial2 := err != nil
	if partial2 {
		if ctx.Err() != nil {
			return err
		}
		e.Logf("%v", err)
	}
	ctrlCPU1, err := benchenv.ProcCPU(ctrl.Pid())
	if err != nil {
		return err
	}
	treeCPU, busyCPU, wall := benchenv.CPUUsed(cpu)
	commitCPULine := benchenv.CPUSince(cpu)
	ctrlCPU := ctrlCPU1 - ctrlCPU0
	atReady, err := ctrl.Memory()
	if err != nil {
		return err
	}
	ops1, _, err := ctrl.Counters()
	if err != nil {
		return err
	}
	calls, err := wrap.CallsFrom(calls0)
	if err != nil {
		return err
	}
	var pulumiCPU time.Duration
	for _, c := range calls {
		pulumiCPU += c.CPU()
	}
	e.Logf("%d/%d Ready at the commit in %s", k, m, commitTime.Round(time.Second))

	// Idle.
	e.Logf("idle for %s", o.idle)
	idleCPU := benchenv.TakeCPU()
	opsIdle0, reconcilesIdle0, err := ctrl.Counters()
	if err != nil {
		return err
	}
	if err := benchenv.Sleep(ctx, o.idle); err != nil {
		return err
	}
	idle, err := ctrl.Memory()
	if err != nil {
		return err
	}
	opsIdle1, reconcilesIdle1, err := ctrl.Counters()
	if err != nil {
		return err
	}
	idleCPULine := benchenv.CPUSince(idleCPU)

	concurrency := "the controller's default"
	if o.concurrency > 0 {
		concurrency = fmt.Sprint(o.concurrency)
	}
	fmt.Printf("\n== fleet results: %d Stacks (one ConfigMap each), --concurrent-operations %s, %d cores\n", m, concurrency, cores)
	if partial1 {
		fmt.Printf("PARTIAL: only %d of %d Stacks were Ready within -timeout %s; the other %d are suspended and the rest is measured with %d\n", m, o.n, o.timeout, o.n-m, m)
	}
	fmt.Printf("first apply of %d (not the measure): %s (%.1f Stacks/min)\n", m, createTime.Round(time.Second), float64(m)/createTime.Minutes())
	fmt.Printf("  %s\n", createCPULine)
	atLeast := ""
	if partial2 {
		atLeast = "at least "
		fmt.Printf("PARTIAL: only %d of %d Stacks were Ready at the commit within -timeout %s: the time and the ratio below are lower bounds\n", k, m, o.timeout)
	}
	fmt.Printf("one commit changing all %d, commit to all Ready: %s%s (%.1f Stacks/min)\n", m, atLeast, commitTime.Round(100*time.Millisecond), float64(k)/commitTime.Minutes())
	fmt.Printf("floor: bare pulumi up CPU %s (median of %d) × %d / %d cores = %s\n", benchenv.Seconds(floorCPU), o.floorRuns, m, cores, floor.Round(100*time.Millisecond))
	fmt.Printf("ratio to the floor: %s%.2fx, target at most 1.5x\n", atLeast, commitTime.Seconds()/floor.Seconds())
	fmt.Printf("controller process CPU in the commit phase: %s = %.1f %% of this benchmark's CPU (%s), %.1f %% of the machine's (%s over %s); target at most 5 %%\n",
		benchenv.Seconds(ctrlCPU), benchenv.Pct(ctrlCPU, treeCPU), benchenv.Seconds(treeCPU), benchenv.Pct(ctrlCPU, busyCPU), benchenv.Seconds(busyCPU), wall.Round(time.Second))
	fmt.Printf("pulumi processes in the commit phase: %d (%.1f per Stack: %s), their CPU %s (%.2fs per Stack, bare: %s); %.0f operations\n",
		len(calls), float64(len(calls))/float64(max(k, 1)), commandsPerStack(calls, max(k, 1)), benchenv.Seconds(pulumiCPU),
		pulumiCPU.Seconds()/float64(max(k, 1)), benchenv.Seconds(floorCPU), ops1-ops0)
	fmt.Printf("  %s\n", commitCPULine)
	fmt.Printf("controller peak RSS (VmHWM) over the whole run: %s\n", benchenv.MiB(atReady.HWM))
	fmt.Printf("%-28s %s\n", "no Stacks:", base)
	fmt.Printf("%-28s %s\n", "all Ready at the commit:", atReady)
	fmt.Printf("%-28s %s\n", fmt.Sprintf("after %s idle:", o.idle), idle)
	fmt.Printf("idle RSS with %d Stacks: %s, target at most 150 MiB (Flux's kustomize-controller: 1,000 Kustomizations in 223 MiB); %.1f KiB per Stack over no Stacks\n",
		m, benchenv.MiB(idle.RSS), float64(idle.RSS-base.RSS)/float64(m)/1024)
	fmt.Printf("while idle: %.0f reconciles, %.0f Pulumi operations\n", reconcilesIdle1-reconcilesIdle0, opsIdle1-opsIdle0)
	fmt.Printf("  %s\n", idleCPULine)
	if m < 1000 || partial2 {
		est := createTime + commitTime
		scale := 1000 / float64(min(m, max(k, 1)))
		fmt.Printf("ESTIMATE for -n 1000 (linear in the two apply phases, from this run): about %s (first apply %s + commit %s + idle %s + setup)\n",
			(time.Duration(float64(est)*scale) + o.idle + time.Minute).Round(time.Minute),
			time.Duration(float64(createTime)*scale).Round(time.Minute), time.Duration(float64(commitTime)*scale).Round(time.Minute), o.idle)
	}
	fmt.Printf("load average at the end: %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
	return nil
}

// commandsPerStack summarises the subcommands of calls by count per Stack.
func commandsPerStack(calls []benchenv.Call, n int) string {
	counts := map[string]int{}
	var order []string
	for _, c := range calls {
		if counts[c.Command()] == 0 {
			order = append(order, c.Command())
		}
		counts[c.Command()]++
	}
	s := ""
	for i, cmd := range order {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s ×%.2g", cmd, float64(counts[cmd])/float64(n))
	}
	return s
}

// measureFloor runs a bare stack of the same program: its first up untimed,
// then floorRuns ups with a change each; it returns the medians of their CPU
// and wall times.
func measureFloor(ctx context.Context, e *benchenv.Env, o options) (cpu, wall time.Duration, err error) {
	bare, err := e.NewBare(ctx, "bare", "bare", 5*time.Minute)
	if err != nil {
		return 0, 0, err
	}
	if err := bare.SetUp(ctx, benchenv.ConfigMapProgram(project, 0, false), map[string]string{
		project + ":namespace": namespace, project + ":configMapName": "fleet-bare", "kubernetes:enableConfigMapMutable": "true",
	}); err != nil {
		return 0, 0, err
	}
	var cpus, walls []time.Duration
	for i := 1; i <= o.floorRuns; i++ {
		up, err := bare.Up(ctx, benchenv.ConfigMapProgram(project, i, false))
		if err != nil {
			return 0, 0, err
		}
		e.Logf("bare up %d: wall %s, CPU %s", i, benchenv.Seconds(up.Wall), benchenv.Seconds(up.CPU))
		cpus, walls = append(cpus, up.CPU), append(walls, up.Wall)
	}
	return benchenv.Median(cpus), benchenv.Median(walls), nil
}

// waitAll waits until want Stacks are Applied at commit, with a progress
// line every 30s that estimates when the phase ends at its rate so far. It
// returns how many were applied when it stopped (want, or fewer with an error
// at -timeout).
func waitAll(ctx context.Context, e *benchenv.Env, ctrl *benchenv.Controller, o options, commit string, want int, start time.Time, phase string) (int, error) {
	applied, err := e.WaitAllApplied(ctx, namespace, commit, want, o.timeout, 30*time.Second, func(applied int) {
		elapsed := time.Since(start)
		eta := "?"
		if applied > 0 {
			eta = (time.Duration(float64(elapsed)*float64(want)/float64(applied)) - elapsed).Round(time.Second).String()
		}
		m, _ := ctrl.Memory()
		e.Logf("  %s: %d/%d Ready after %s (%.1f Stacks/min, about %s left); controller RSS %s", phase, applied, want,
			elapsed.Round(time.Second), float64(applied)/elapsed.Minutes(), eta, benchenv.MiB(m.RSS))
	})
	if err != nil {
		return applied, fmt.Errorf("%s: %w (controller log %s)", phase, err, ctrl.LogPath)
	}
	return applied, nil
}
