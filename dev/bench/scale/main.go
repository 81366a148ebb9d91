// Command scale measures Stackpilot with a large fleet (issue 24: 10,000
// Stacks) of trivial Stacks, on one controller or split across shards that
// run side by side on the same machine, as `stackpilot install --shards N`
// sets them up:
//
//   - the time until all are Ready after they are created, and after one
//     commit that changes every one of them, against a floor: the CPU a bare
//     `pulumi` needs for the same work, times n, divided by the cores;
//   - what the fleet costs while nothing changes, over whole intervals: each
//     controller's RSS (and Go heap, goroutines) against its RSS with no
//     Stacks, and the reconciles, Pulumi processes and Git requests;
//   - whether the per-Stack memory grows with history (measured again after
//     the commit, when every Stack's history holds one more record);
//   - where the CPU went, by process (the API server, etcd, the
//     controllers, Pulumi), so that a bottleneck other than Pulumi shows.
//
// The program is trivial on purpose (no provider, no resource: two outputs)
// so that Pulumi's own share is as small as it gets and Stackpilot's cost
// shows. Each Stack's config gives it its own output.
//
//	go -C dev run ./bench/scale [-n 10000] [-shards 0] [-commits 1] [-interval 5m] [-idle 10m] [-timeout 4h] [-v] [-keep]
//	go -C dev run ./bench/scale -resume /tmp/stackpilot-bench-scale-… [-shards M] [-concurrent-operations C] [-skip-commit] [-commits 1]
//
// A run with -keep leaves the fleet in its directory; -resume starts it again
// (see resume.go): the commit phase of 10,000 Stacks can then run in another
// sitting than their creation, and the restart is measured on the way.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

const (
	namespace = "bench-scale"
	project   = "scale"
	repo      = "scale"
	branch    = "main"
	dir       = "app"
)

type options struct {
	n, shards int
	reshard   int // -shards given with -resume: the layout to move the kept fleet to; -1 when not given
	// concurrencyGiven: -concurrent-operations was given, so -resume starts
	// the kept fleet's controllers with it instead of the kept run's.
	concurrencyGiven bool
	concurrency      int
	interval, idle   time.Duration
	drift            time.Duration
	timeout          time.Duration
	floorRuns        int
	skipCommit       bool
	commits          int
	sharedState      bool
	verbose, keep    bool
	resume           string
}

func main() {
	benchenv.OwnFlags()
	var o options
	flag.IntVar(&o.n, "n", 10000, "Number of Stacks.")
	flag.IntVar(&o.shards, "shards", 0, "0: one controller serves every Stack; N: the Stacks are labelled round-robin for N shards, each its own controller process beside the main one.")
	flag.IntVar(&o.concurrency, "concurrent-operations", 0, "Each controller's --concurrent-operations (0: its default).")
	flag.DurationVar(&o.interval, "interval", 5*time.Minute, "The Stacks' spec.interval: how often each checks its source while idle.")
	flag.DurationVar(&o.drift, "drift-interval", 0, "The Stacks' spec.driftDetection.interval; 0 (the default here) disables scheduled drift checks: each is a pulumi refresh, and at the product's default of an hour 10,000 Stacks need about 1.5 of this machine's 2 cores for them alone.")
	flag.DurationVar(&o.idle, "idle", 0, "How long the idle measurement after creation lasts (0: two intervals).")
	flag.DurationVar(&o.timeout, "timeout", 4*time.Hour, "Bound on each apply phase (creation, the commit).")
	flag.IntVar(&o.floorRuns, "floor-runs", 5, "Bare `pulumi up` runs whose median CPU makes the floor.")
	flag.BoolVar(&o.sharedState, "shared-state-dir", false, "Keep the controllers' default backend, one file:// directory per namespace, instead of a directory per Stack: Pulumi's file backend lists the directory in every operation, so ups get slower as the fleet grows.")
	flag.BoolVar(&o.skipCommit, "skip-commit", false, "Stop after creation and the idle measurement: no commit phase (half the run's time).")
	flag.IntVar(&o.commits, "commits", 1, "Commits, one after another, each changing every Stack and followed by an idle measurement: with 2 or more the heap after the second tells history growth apart from what the first operation in a process costs once.")
	flag.BoolVar(&o.verbose, "v", false, "Copy the controllers' logs to stderr.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory (logs, heap profiles, and the fleet itself for -resume).")
	flag.StringVar(&o.resume, "resume", "", "Start again the fleet a run with -keep left in this directory (its "+fleetFile+" says which): restart its controllers, then measure idle and the commit. -n, -interval, -drift-interval and -shared-state-dir come from the kept run; so do -concurrent-operations and -shards, unless given: then every Stack is relabelled for that layout before the controllers start (reshard.go).")
	flag.Parse()
	o.reshard = -1
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "shards":
			o.reshard = o.shards
		case "concurrent-operations":
			o.concurrencyGiven = true
		}
	})
	if o.idle == 0 {
		o.idle = 2 * o.interval
	}
	if o.n < 1 || o.shards < 0 || o.commits < 1 {
		fmt.Fprintln(os.Stderr, "bench/scale: -n and -commits must be at least 1, and -shards at least 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(1)
	}
}

// program is the trivial Pulumi YAML program: no provider and no resource.
// index comes from each Stack's config; run is what the commit changes.
func program(run int) string {
	return fmt.Sprintf(`name: %s
runtime: yaml
config:
  index:
    type: string
outputs:
  index: ${index}
  run: "%d"
`, project, run)
}

func layout(o options) string {
	if o.shards == 0 {
		return "one controller"
	}
	return fmt.Sprintf("%d shards beside the main controller", o.shards)
}

// floor is what a bare pulumi needs for the fleet's work, per Stack.
type floor struct {
	firstApply time.Duration // stack init + the first up: CPU
	up         time.Duration // an up with a change: median CPU
}

func run(ctx context.Context, o options) error {
	var kept *keptFleet
	if o.resume != "" {
		k, err := loadFleet(o.resume, &o)
		if err != nil {
			return err
		}
		// restart waits until every Stack is Applied at k.Commit: a branch
		// that moved on (a commit round stopped) would keep it waiting.
		head, err := branchHead(o.resume)
		if err != nil {
			return err
		}
		if head != k.Commit {
			return fmt.Errorf("-resume %s: the branch %s is at %s, not at the kept commit %s (a commit round was stopped): reset it with git --git-dir %s update-ref refs/heads/%s %s",
				o.resume, branch, head, k.Commit, filepath.Join(o.resume, "git", repo+".git"), branch, k.Commit)
		}
		kept = &k
	}
	what := fmt.Sprintf("scale: %d trivial Stacks on %s", o.n, layout(o))
	var e *benchenv.Env
	var err error
	if kept != nil {
		e, err = benchenv.Resume(ctx, "scale", o.resume, kept.GitAddr, what+", resumed from "+o.resume, os.Stdout)
	} else {
		e, err = benchenv.Start(ctx, "scale", what, os.Stdout)
	}
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, e.Keep || o.keep
	defer e.Close()
	if kept == nil {
		if err := e.Namespace(ctx, namespace); err != nil {
			return err
		}
	} else {
		// The bare stack of the kept run's floor exists: measure on a new one.
		for _, d := range []string{"bare", "bare-wrap"} {
			if err := os.RemoveAll(filepath.Join(e.Tmp, d)); err != nil {
				return err
			}
		}
	}
	cores := runtime.NumCPU()
	fl, err := measureFloor(ctx, e, o)
	if err != nil {
		return err
	}
	e.Logf("bare pulumi of one Stack: first apply (stack init + up) CPU %s, up with a change median CPU %s over %d runs",
		benchenv.Seconds(fl.firstApply), benchenv.Seconds(fl.up), o.floorRuns)
	wrap, err := e.NewWrapper(ctx, "wrap")
	if err != nil {
		return err
	}
	r := results{o: o, cores: cores, floor: fl}
	var commit0 string
	var watch *benchenv.StackWatch
	if kept != nil {
		commit0, r.base, r.created, r.run = kept.Commit, kept.Base, kept.Created, kept.Run
		if o.reshard >= 0 && o.reshard != kept.Shards {
			e.Logf("resharding the kept fleet from %s to %s: relabelling its %d Stacks", layout(o), layout(options{shards: o.reshard}), o.n)
			r.reshardedFrom = layout(o)
			if r.relabelTime, err = relabel(ctx, e, o.n, o.reshard); err != nil {
				return err
			}
			e.Logf("  relabelled in %s", r.relabelTime.Round(time.Millisecond))
			o.shards, r.o.shards = o.reshard, o.reshard
			// The kept memory with no Stacks is of the other layout's
			// controllers; these are not measured without Stacks.
			r.base = make([]benchenv.Memory, len(members(o.n, o.shards)))
			// The Stacks are labelled for the new layout now: a later
			// -resume starts its controllers, commit or not.
			if err := saveFleet(e, o, commit0, r.created, r.base, r.run); err != nil {
				return err
			}
		}
		if r.ctrls, watch, err = restart(ctx, e, o, wrap, commit0, &r); err != nil {
			return err
		}
	} else {
		if commit0, err = e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": program(0)}, "run 0"); err != nil {
			return err
		}
		if r.ctrls, watch, err = create(ctx, e, o, wrap, commit0, &r); err != nil {
			return err
		}
	}
	ctrls := r.ctrls

	// Idle, over whole intervals.
	if r.idle1, err = measureIdle(ctx, e, ctrls, wrap, o.idle); err != nil {
		return err
	}
	heapTop, err := benchenv.HeapTop(ctx, ctrls.largest().pprof, filepath.Join(e.Tmp, ctrls.largest().name+"-heap-idle.pprof"), 15)
	if err != nil {
		e.Logf("no heap profile: %v", err)
	} else {
		e.Logf("heap profile of %s saved in %s", ctrls.largest().name, e.Tmp)
	}
	r.heapTop = heapTop
	for i := 0; i < o.commits && !o.skipCommit; i++ {
		c, err := commitAll(ctx, e, watch, ctrls, wrap, o, commit0, &r)
		if err != nil {
			return err
		}
		r.commits = append(r.commits, c)
		if c.err != nil {
			break // not all Ready: the report says how far it got; another commit would measure nothing clean
		}
		commit0 = c.commit
	}
	r.print()
	return nil
}

// create starts the controllers, reads their memory with no Stacks, creates
// the fleet and waits until it is Ready at commit0. With -keep it leaves
// fleetFile for -resume.
func create(ctx context.Context, e *benchenv.Env, o options, wrap *benchenv.Wrapper, commit0 string, r *results) (fleet, *benchenv.StackWatch, error) {
	ctrls, err := startFleet(ctx, e, o.n, o.shards, !o.sharedState, append(benchenv.PulumiArgs(wrap), benchenv.ConcurrencyArgs(o.concurrency)...))
	if err != nil {
		return nil, nil, err
	}
	watch, err := e.WatchStacks(ctx, namespace)
	if err != nil {
		return nil, nil, err
	}
	if err := benchenv.Sleep(ctx, 10*time.Second); err != nil { // settled: caches synced, first GC
		return nil, nil, err
	}
	if r.base, err = ctrls.memory(); err != nil {
		return nil, nil, err
	}
	for i, m := range ctrls {
		e.Logf("%s with no Stacks: %s", m.name, r.base[i])
	}

	created, err := phaseStart(e, ctrls, wrap)
	if err != nil {
		return nil, nil, err
	}
	t0 := time.Now()
	if err := createAll(ctx, e, o); err != nil {
		return nil, nil, err
	}
	e.Logf("created %d Stacks in %s; waiting for all to be Ready (at most %s)", o.n, benchenv.Since(t0), o.timeout)
	k0, waitErr := waitAll(ctx, e, watch, ctrls, commit0, o.n, o.timeout, t0, "creation")
	r.createTime, r.createErr = time.Since(t0), waitErr
	if waitErr != nil {
		// Measure with the Stacks that made it: the others are suspended, so
		// that the idle measurement sees no operation.
		if ctx.Err() != nil || k0 == 0 {
			return nil, nil, waitErr
		}
		e.Logf("%v; suspending the others and waiting 30s for operations in flight", waitErr)
		names, err := e.SettleApplied(ctx, namespace, commit0)
		if err != nil {
			return nil, nil, err
		}
		k0 = len(names)
	}
	r.created = k0
	if r.create, err = created.end(ctrls, wrap); err != nil {
		return nil, nil, err
	}
	if e.Keep {
		if err := saveFleet(e, o, commit0, k0, r.base, r.run); err != nil {
			return nil, nil, err
		}
		e.Logf("fleet kept: go -C dev run ./bench/scale -resume %s", e.Tmp)
	}
	return ctrls, watch, nil
}

// restart starts the controllers of a kept fleet and waits until they have
// reconciled every Stack once: what a controller restart (an upgrade, a
// rescheduled Pod) costs with the whole fleet Ready. Nothing changed, so the
// goal is no Pulumi process and one Git listing. It then waits until every
// Stack is Applied at commit0.
func restart(ctx context.Context, e *benchenv.Env, o options, wrap *benchenv.Wrapper, commit0 string, r *results) (fleet, *benchenv.StackWatch, error) {
	mark, err := phaseStart(e, nil, wrap) // no controller yet: their counters start at zero
	if err != nil {
		return nil, nil, err
	}
	t0 := time.Now()
	ctrls, err := startFleet(ctx, e, o.n, o.shards, !o.sharedState, append(benchenv.PulumiArgs(wrap), benchenv.ConcurrencyArgs(o.concurrency)...))
	if err != nil {
		return nil, nil, err
	}
	watch, err := e.WatchStacks(ctx, namespace)
	if err != nil {
		return nil, nil, err
	}
	r.restartErr = awaitRestart(ctx, e, ctrls, r.created, o.timeout)
	if r.restartErr == nil {
		// A kept fleet whose commit round was stopped has Stacks at a later
		// commit than fleetFile's. With the branch reset to that commit
		// (run checks), they apply it again here, so that idle and the
		// commit measure a fleet at one revision. A clean fleet passes at
		// once.
		e.Logf("  waiting until all %d Stacks are Applied at the kept commit %s", r.created, commit0[:12])
		_, r.restartErr = waitAll(ctx, e, watch, ctrls, commit0, r.created, o.timeout, t0, "restart")
	}
	r.restartTime = time.Since(t0)
	if r.restartErr != nil && ctx.Err() != nil {
		return nil, nil, r.restartErr
	}
	r.resumed = true
	if r.restart, err = mark.end(ctrls, wrap); err != nil {
		return nil, nil, err
	}
	r.restart.git = e.GitCounts().Sub(mark.git)
	return ctrls, watch, nil
}

// commitAll commits a change to every Stack's program, requests a reconcile
// of each as a webhook would, waits until all are Ready at it, and measures
// the fleet idle again: every Stack's history is one record longer. It saves
// the largest controller's heap profile after that idle measurement, for
// `go tool pprof -base` against the one before.
func commitAll(ctx context.Context, e *benchenv.Env, watch *benchenv.StackWatch, ctrls fleet, wrap *benchenv.Wrapper, o options, commit0 string, r *results) (commitRound, error) {
	var c commitRound
	committed, err := phaseStart(e, ctrls, wrap)
	if err != nil {
		return c, err
	}
	t1 := time.Now()
	r.run++
	c.run = r.run
	if c.commit, err = e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": program(r.run)}, fmt.Sprintf("run %d: every Stack changes", r.run)); err != nil {
		return c, err
	}
	names, err := e.AppliedNames(ctx, namespace, commit0)
	if err != nil {
		return c, err
	}
	if err := e.RequestAll(ctx, namespace, names, 16); err != nil {
		return c, err
	}
	e.Logf("committed %s and requested a reconcile of %d Stacks in %s", c.commit[:12], len(names), benchenv.Since(t1))
	c.wanted = len(names)
	c.done, c.err = waitAll(ctx, e, watch, ctrls, c.commit, len(names), o.timeout, t1, fmt.Sprintf("the commit of run %d", c.run))
	c.took = time.Since(t1)
	if c.err != nil && ctx.Err() != nil {
		return c, c.err
	}
	if c.phase, err = committed.end(ctrls, wrap); err != nil {
		return c, err
	}
	if e.Keep && c.err == nil {
		// A later -resume goes on from this commit.
		if err := saveFleet(e, o, c.commit, c.done, r.base, r.run); err != nil {
			return c, err
		}
	}
	if c.idle, err = measureIdle(ctx, e, ctrls, wrap, min(o.idle, o.interval)); err != nil {
		return c, err
	}
	largest := ctrls.largest()
	profile := filepath.Join(e.Tmp, fmt.Sprintf("%s-heap-run%d.pprof", largest.name, c.run))
	if _, err := benchenv.HeapTop(ctx, largest.pprof, profile, 15); err != nil {
		e.Logf("no heap profile: %v", err)
	} else {
		e.Logf("heap profile of %s after run %d saved in %s", largest.name, c.run, profile)
	}
	return c, nil
}

// measureFloor runs a bare stack of the same program: its creation (stack
// init and first up) once, then floorRuns ups with a change each.
func measureFloor(ctx context.Context, e *benchenv.Env, o options) (floor, error) {
	bare, err := e.NewBare(ctx, "bare", "bare", 5*time.Minute)
	if err != nil {
		return floor{}, err
	}
	if err := bare.SetUp(ctx, program(0), map[string]string{project + ":index": "bare"}); err != nil {
		return floor{}, err
	}
	calls, err := bare.Wrap.Calls()
	if err != nil {
		return floor{}, err
	}
	var f floor
	for _, c := range calls {
		f.firstApply += c.CPU()
	}
	var cpus []time.Duration
	for i := 1; i <= o.floorRuns; i++ {
		up, err := bare.Up(ctx, program(i))
		if err != nil {
			return floor{}, err
		}
		cpus = append(cpus, up.CPU)
	}
	f.up = benchenv.Median(cpus)
	return f, nil
}

// driftDetection is the Stacks' spec.driftDetection: scheduled checks every
// interval, or none for 0.
func driftDetection(interval time.Duration) *v1alpha1.DriftDetection {
	if interval == 0 {
		return &v1alpha1.DriftDetection{Mode: v1alpha1.DriftDisabled}
	}
	return &v1alpha1.DriftDetection{Mode: v1alpha1.DriftDetect, Interval: &metav1.Duration{Duration: interval}}
}

// createAll creates the n Stacks, 16 requests at a time, each labelled for
// its shard.
func createAll(ctx context.Context, e *benchenv.Env, o options) error {
	return benchenv.Parallel(ctx, o.n, 16, func(i int) error {
		var labels map[string]string
		if shard := shardOf(i, o.shards); shard != "" {
			labels = map[string]string{shardKey: shard}
		}
		s, err := benchenv.StackSpec{
			Namespace: namespace, Name: stackName(i), Labels: labels,
			URL: e.Git.URL(repo), Branch: branch, Dir: dir,
			Interval: o.interval, Config: map[string]any{"index": fmt.Sprint(i)},
			Drift: driftDetection(o.drift),
		}.Stack()
		if err == nil {
			err = e.Client.Create(ctx, s)
		}
		if err != nil {
			return fmt.Errorf("create Stack %d: %w", i, err)
		}
		return nil
	})
}

// waitAll waits until want Stacks are Applied at commit, with a progress
// line every minute.
func waitAll(ctx context.Context, e *benchenv.Env, w *benchenv.StackWatch, ctrls fleet, commit string, want int, timeout time.Duration, start time.Time, phase string) (int, error) {
	applied, err := w.WaitAllApplied(ctx, commit, want, timeout, time.Minute, func(applied int) {
		elapsed := time.Since(start)
		eta := "?"
		if applied > 0 {
			eta = (time.Duration(float64(elapsed)*float64(want)/float64(applied)) - elapsed).Round(time.Second).String()
		}
		mem, _ := ctrls.memory()
		e.Logf("  %s: %d/%d Ready after %s (%.1f Stacks/min, about %s left); controllers' RSS %s", phase, applied, want,
			elapsed.Round(time.Second), float64(applied)/elapsed.Minutes(), eta, benchenv.MiB(totalRSS(mem)))
	})
	if err != nil {
		return applied, fmt.Errorf("%s: %w", phase, err)
	}
	return applied, nil
}
