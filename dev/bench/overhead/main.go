// Command overhead measures what Stackpilot adds to a Pulumi deployment:
// commit-to-Ready of a Stack against a bare `pulumi up` of the same program
// with the same backend kind, CLI, plugins and environment.
//
// Each run changes the data of a ConfigMap that a Pulumi YAML program manages
// through the Kubernetes provider. Stackpilot side: commit the change to the Git
// server, set the stackpilot.dev/requestedAt annotation (as a webhook receiver
// would) and time until the Stack is Ready at the new revision. Bare side: write
// the same Pulumi.yaml into a work dir and time `pulumi up --yes --skip-preview`.
// The two alternate, so that load from elsewhere falls on both alike.
//
// Both sides run pulumi through the same exec wrapper (dev/bench/internal/pulumiwrap),
// whose log gives the wall time spent inside pulumi processes: the Stackpilot
// side's time splits into the controller's share (commit-to-Ready minus the
// runner's operation), the runner's own (its operation minus the time inside
// pulumi) and Pulumi's.
//
//	go -C dev run ./bench/overhead [-n 5] [-concurrent-operations 0] [-timeout 5m] [-v] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

const (
	namespace = "bench-overhead"
	repo      = "overhead"
	branch    = "main"
	dir       = "app"
	stackName = "overhead"
	bareStack = "bare"
)

// program is the Pulumi YAML program both sides run; run changes each time.
func program(run int) string {
	return fmt.Sprintf(`name: overhead
runtime: yaml
config:
  namespace:
    type: string
  configMapName:
    type: string
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: ${configMapName}
        namespace: ${namespace}
      data:
        color: blue
        run: "%d"
    options:
      deleteBeforeReplace: true
outputs:
  configMap: ${settings.metadata.name}
`, run)
}

type options struct {
	runs        int
	concurrency int
	timeout     time.Duration
	verbose     bool
	keep        bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	flag.IntVar(&o.runs, "n", 5, "Number of timed runs on each side.")
	flag.IntVar(&o.concurrency, "concurrent-operations", 0, "The controller's --concurrent-operations (0: its default).")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "Bound on each wait for Ready and each `pulumi up`.")
	flag.BoolVar(&o.verbose, "v", false, "Copy the controller's log to stderr.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory (logs, state, work dir).")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/overhead:", err)
		os.Exit(1)
	}
}

// sample is one run of each side.
type sample struct {
	stackpilot time.Duration // commit to Ready at the new revision
	configMap  time.Duration // commit to the ConfigMap holding the new data
	runnerOp   time.Duration // the runner's operation (stackpilot_operation_duration_seconds)
	pulumi     time.Duration // inside pulumi processes during the Stackpilot side (wrapper log)
	procs      int           // pulumi processes the Stackpilot side started
	commands   string        // their argv[1], in order
	bare       time.Duration // pulumi up --yes --skip-preview, timed by the bench
	barePulumi time.Duration // the same, from the wrapper's log
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "overhead", "overhead: commit-to-Ready through Stackpilot vs bare `pulumi up`", os.Stdout)
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, o.keep
	defer e.Close()

	if err := e.Namespace(ctx, namespace); err != nil {
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
	bare, err := e.NewBare(ctx, "bare", bareStack, o.timeout)
	if err != nil {
		return err
	}

	// Stackpilot side: the Stack, applied once (not timed).
	commit, err := e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": program(0)}, "run 0")
	if err != nil {
		return err
	}
	spState := filepath.Join(e.Tmp, "stackpilot-state")
	if err := os.MkdirAll(spState, 0o755); err != nil {
		return err
	}
	stack, err := benchenv.StackSpec{
		Namespace: namespace, Name: stackName,
		URL: e.Git.URL(repo), Branch: branch, Dir: dir,
		Backend:  "file://" + spState,
		Interval: time.Hour, // no periodic reconcile during the runs
		Config: map[string]any{
			"namespace":                         namespace,
			"configMapName":                     "overhead-stackpilot",
			"kubernetes:enableConfigMapMutable": true,
		},
	}.Stack()
	if err != nil {
		return err
	}
	if err := e.Client.Create(ctx, stack); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(stack)
	t0 := time.Now()
	if _, err := waitApplied(ctx, e, key, commit, "", 0, o.timeout); err != nil {
		return fmt.Errorf("first apply: %w (controller log: %s)", err, ctrl.LogPath)
	}
	e.Logf("Stack %s Ready at %s (first apply, not timed: %s)", key, commit[:12], benchenv.Since(t0))

	// Bare side: stack init, config and the first up (not timed).
	t0 = time.Now()
	if err := bare.SetUp(ctx, program(0), map[string]string{
		"overhead:namespace": namespace, "overhead:configMapName": "overhead-bare", "kubernetes:enableConfigMapMutable": "true",
	}); err != nil {
		return err
	}
	e.Logf("bare stack %q created and applied (first up, not timed: %s)", bareStack, benchenv.Since(t0))

	cpu := benchenv.TakeCPU()
	var samples []sample
	for i := 1; i <= o.runs; i++ {
		var s sample
		sum0, count0, err := upOperations(ctrl)
		if err != nil {
			return err
		}
		calls0, err := wrap.Count()
		if err != nil {
			return err
		}
		// Stackpilot: commit, request a reconcile, wait for Ready at the commit.
		start := time.Now()
		commit, err := e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": program(i)}, fmt.Sprintf("run %d", i))
		if err != nil {
			return err
		}
		if err := e.RequestReconcile(ctx, key); err != nil {
			return err
		}
		cmAt, err := waitApplied(ctx, e, key, commit, "overhead-stackpilot", i, o.timeout)
		if err != nil {
			return fmt.Errorf("run %d: %w (controller log: %s)", i, err, ctrl.LogPath)
		}
		s.stackpilot = time.Since(start)
		s.configMap = cmAt.Sub(start)
		sum, count, err := upOperations(ctrl)
		if err != nil {
			return err
		}
		sum, count = sum-sum0, count-count0
		if count != 1 {
			return fmt.Errorf("run %d: the controller ran %.0f up operations, want 1", i, count)
		}
		s.runnerOp = time.Duration(sum * float64(time.Second))
		calls, err := wrap.CallsFrom(calls0)
		if err != nil {
			return err
		}
		s.pulumi, s.procs, s.commands = benchenv.WallInside(calls), len(calls), benchenv.Commands(calls)
		for _, c := range benchenv.Failed(calls) {
			e.Logf("  warning: pulumi %s exited %d", c.Command(), c.Exit)
		}

		// Bare: the same program, pulumi up.
		up, err := bare.Up(ctx, program(i))
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		s.bare, s.barePulumi = up.Wall, up.Inside
		if err := checkData(ctx, e, "overhead-bare", i); err != nil {
			return fmt.Errorf("run %d (bare): %w", i, err)
		}
		e.Logf("run %d: stackpilot %s (ConfigMap changed at %s, runner operation %s, inside %d pulumi processes %s: %s), bare pulumi up %s",
			i, benchenv.Seconds(s.stackpilot), benchenv.Seconds(s.configMap), benchenv.Seconds(s.runnerOp),
			s.procs, benchenv.Seconds(s.pulumi), s.commands, benchenv.Seconds(s.bare))
		samples = append(samples, s)
	}
	cpuLine := benchenv.CPUSince(cpu)

	pick := func(f func(sample) time.Duration) []time.Duration {
		var out []time.Duration
		for _, s := range samples {
			out = append(out, f(s))
		}
		return out
	}
	sp := benchenv.Median(pick(func(s sample) time.Duration { return s.stackpilot }))
	cm := benchenv.Median(pick(func(s sample) time.Duration { return s.configMap }))
	op := benchenv.Median(pick(func(s sample) time.Duration { return s.runnerOp }))
	pu := benchenv.Median(pick(func(s sample) time.Duration { return s.pulumi }))
	br := benchenv.Median(pick(func(s sample) time.Duration { return s.bare }))
	bp := benchenv.Median(pick(func(s sample) time.Duration { return s.barePulumi }))
	ctrlShare := benchenv.Median(pick(func(s sample) time.Duration { return s.stackpilot - s.runnerOp }))
	runnerShare := benchenv.Median(pick(func(s sample) time.Duration { return s.runnerOp - s.pulumi }))

	fmt.Printf("\n== overhead results (%d runs each, alternating)\n", len(samples))
	fmt.Printf("%-6s %11s %15s %12s %10s %6s %10s %14s %8s\n", "run", "stackpilot", "(ConfigMap at)", "(runner op)", "(pulumi)", "procs", "bare up", "(bare pulumi)", "ratio")
	row := func(name string, s sample) {
		fmt.Printf("%-6s %11s %15s %12s %10s %6d %10s %14s %7.2fx\n", name, benchenv.Seconds(s.stackpilot), benchenv.Seconds(s.configMap),
			benchenv.Seconds(s.runnerOp), benchenv.Seconds(s.pulumi), s.procs, benchenv.Seconds(s.bare), benchenv.Seconds(s.barePulumi),
			s.stackpilot.Seconds()/s.bare.Seconds())
	}
	for i, s := range samples {
		row(fmt.Sprint(i+1), s)
	}
	procs := pick(func(s sample) time.Duration { return time.Duration(s.procs) })
	row("median", sample{stackpilot: sp, configMap: cm, runnerOp: op, pulumi: pu, procs: int(benchenv.Median(procs)), bare: br, barePulumi: bp})
	fmt.Printf("\nratio of medians, Stackpilot commit-to-Ready / bare pulumi up: %.2fx, target at most 1.25x (Stackpilot adds %s)\n",
		sp.Seconds()/br.Seconds(), benchenv.Seconds(sp-br))
	fmt.Printf("breakdown of Stackpilot's %s (medians of the per-run differences):\n", benchenv.Seconds(sp))
	fmt.Printf("  controller %s = commit-to-Ready - runner op (annotation-to-reconcile, ls-remote, fetch and unpack, runner process start, status patches)\n", benchenv.Seconds(ctrlShare))
	fmt.Printf("  runner     %s = runner op - time inside pulumi (spec, config and result handling between the CLI calls)\n", benchenv.Seconds(runnerShare))
	fmt.Printf("  Pulumi     %s = wall time inside the pulumi processes of the operation, from the wrapper's log (bare up: %s inside pulumi)\n", benchenv.Seconds(pu), benchenv.Seconds(bp))
	fmt.Printf("  pulumi processes per operation: %s (bare: 1); run 1: %s\n", fmt.Sprint(int(benchenv.Median(procs))), samples[0].commands)
	fmt.Printf("  runner op: stackpilot_operation_duration_seconds (the runner's Result startedAt..finishedAt); ConfigMap at: commit to the new data\n")
	fmt.Printf("  visible in the API server (polled every 50ms).\n")
	fmt.Println(cpuLine)
	fmt.Printf("load average at the end: %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
	return nil
}

// upOperations reads the total duration in seconds and the number of the
// controller's up operations so far, from
// stackpilot_operation_duration_seconds.
func upOperations(ctrl *benchenv.Controller) (seconds, count float64, err error) {
	if seconds, err = ctrl.Metric("stackpilot_operation_duration_seconds_sum", `type="up"`); err != nil {
		return 0, 0, err
	}
	if count, err = ctrl.Metric("stackpilot_operation_duration_seconds_count", `type="up"`); err != nil {
		return 0, 0, err
	}
	return seconds, count, nil
}

// waitApplied polls key every 50ms until it is Applied at commit and, when
// cmName is set, also notes when ConfigMap cmName first shows run. It returns
// that moment (or the Ready moment when cmName is empty).
func waitApplied(ctx context.Context, e *benchenv.Env, key client.ObjectKey, commit, cmName string, run int, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var cmAt time.Time
	var last *v1alpha1.Stack
	for {
		if cmName != "" && cmAt.IsZero() {
			if checkData(ctx, e, cmName, run) == nil {
				cmAt = time.Now()
			}
		}
		s := &v1alpha1.Stack{}
		if err := e.Client.Get(ctx, key, s); err != nil {
			return time.Time{}, err
		}
		last = s
		if benchenv.Applied(s, commit) {
			if cmName == "" {
				return time.Now(), nil
			}
			if cmAt.IsZero() {
				if err := checkData(ctx, e, cmName, run); err != nil {
					return time.Time{}, fmt.Errorf("the Stack is Ready at %s but %w", commit[:12], err)
				}
				cmAt = time.Now()
			}
			return cmAt, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the Stack %s is not Ready at %s within %s: %s", key, commit[:12], timeout, benchenv.ReadyMessage(last))
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func checkData(ctx context.Context, e *benchenv.Env, name string, run int) error {
	var cm corev1.ConfigMap
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cm); err != nil {
		return err
	}
	if got, want := cm.Data["run"], fmt.Sprint(run); got != want {
		return fmt.Errorf("ConfigMap %s has run=%q, want %q", name, got, want)
	}
	return nil
}
