// Command monorepo measures what a commit costs in a repository that holds
// many Stacks: n Pulumi projects in folders s00..s<n-1> of one repository, one
// Stack each, all Ready; then a commit that touches one folder. It counts the
// ups started after the commit, from the controller's operation metric and,
// independently, from an exec wrapper in front of pulumi (its log has one
// line per pulumi process), and the Git server's requests per interval.
//
// Stackpilot decides whether a Stack's program changed by the digest of its
// own subtree, so the target is one up for one touched folder; a controller
// that decides by the commit runs n. The bench prints what it sees either way.
// The commit is found by the Stacks' own interval polling (no reconcile-now
// request), as without a webhook.
//
//	go -C dev run ./bench/monorepo [-n 50] [-interval 20s] [-intervals 3] [-timeout 15m] [-concurrent-operations 0] [-v] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

const (
	namespace = "bench-monorepo"
	repo      = "monorepo"
	branch    = "main"
)

type options struct {
	n           int
	touch       int
	interval    time.Duration
	intervals   int
	timeout     time.Duration
	concurrency int
	verbose     bool
	keep        bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	flag.IntVar(&o.n, "n", 50, "Number of folders, one Stack each.")
	flag.IntVar(&o.touch, "touch", 7, "The folder the second commit touches (s<touch>).")
	flag.DurationVar(&o.interval, "interval", 20*time.Second, "The Stacks' spec.interval: how often each checks the repository.")
	flag.IntVar(&o.intervals, "intervals", 3, "Intervals over which Git requests are counted after the commit has been seen.")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "Bound on the wait for all Stacks to be Ready at the first commit.")
	flag.IntVar(&o.concurrency, "concurrent-operations", 0, "The controller's --concurrent-operations (0: its default).")
	flag.BoolVar(&o.verbose, "v", false, "Copy the controller's log to stderr.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory.")
	flag.Parse()
	if o.touch < 0 || o.touch >= o.n {
		fmt.Fprintln(os.Stderr, "bench/monorepo: -touch must be a folder index below -n")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/monorepo:", err)
		os.Exit(1)
	}
}

func folder(i int) string { return fmt.Sprintf("s%02d", i) }

// program is an outputs-only project (no provider: 50 first applies stay
// quick); version changes with the folder.
func program(i, version int) string {
	return fmt.Sprintf("name: %s\nruntime: yaml\noutputs:\n  folder: %s\n  version: \"%d\"\n", folder(i), folder(i), version)
}

// tree is the repository: every folder at version 1, the touched one at touched.
func tree(n, touch, touched int) map[string]string {
	files := map[string]string{"README.md": fmt.Sprintf("%d Pulumi projects, one per folder\n", n)}
	for i := range n {
		v := 1
		if i == touch {
			v = touched
		}
		files[folder(i)+"/Pulumi.yaml"] = program(i, v)
	}
	return files
}

// counts are the things counted before and after the commit.
type counts struct {
	ups, ops, skipped float64 // stackpilot_operations_total{type="up"}, all types, stackpilot_ups_skipped_total
	wrapperUps, procs int     // from the wrapper's log: `pulumi up` processes, all pulumi processes
	git               benchenv.GitCounts
}

func take(e *benchenv.Env, ctrl *benchenv.Controller, wrap *benchenv.Wrapper) (counts, error) {
	var c counts
	var err error
	if c.ups, err = ctrl.Metric("stackpilot_operations_total", `type="up"`); err != nil {
		return c, err
	}
	if c.ops, err = ctrl.Metric("stackpilot_operations_total"); err != nil {
		return c, err
	}
	if c.skipped, err = ctrl.Metric("stackpilot_ups_skipped_total"); err != nil { // 0 where the controller has no such metric
		return c, err
	}
	calls, err := wrap.Calls()
	if err != nil {
		return c, err
	}
	c.procs, c.wrapperUps = len(calls), benchenv.CountCommand(calls, "up")
	c.git = e.GitCounts()
	return c, nil
}

func (c counts) sub(d counts) counts {
	return counts{c.ups - d.ups, c.ops - d.ops, c.skipped - d.skipped, c.wrapperUps - d.wrapperUps, c.procs - d.procs, c.git.Sub(d.git)}
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "monorepo", fmt.Sprintf("monorepo: %d Stacks in one repository, a commit touching one folder", o.n), os.Stdout)
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, o.keep
	defer e.Close()
	if err := e.Namespace(ctx, namespace); err != nil {
		return err
	}
	first, err := e.Commit(repo, branch, tree(o.n, o.touch, 1), "one project per folder")
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
	for i := range o.n {
		s, err := benchenv.StackSpec{
			Namespace: namespace, Name: folder(i),
			URL: e.Git.URL(repo), Branch: branch, Dir: folder(i),
			Interval: o.interval,
		}.Stack()
		if err != nil {
			return err
		}
		if err := e.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("create Stack %d: %w", i, err)
		}
	}
	t0 := time.Now()
	e.Logf("created %d Stacks (interval %s); waiting for all to be Ready at %s", o.n, o.interval, first[:12])
	if _, err := e.WaitAllApplied(ctx, namespace, first, o.n, o.timeout, 30*time.Second, func(applied int) {
		e.Logf("  %d/%d Ready after %s", applied, o.n, benchenv.Since(t0))
	}); err != nil {
		return fmt.Errorf("%w (controller log: %s)", err, ctrl.LogPath)
	}
	firstApply := time.Since(t0)
	e.Logf("all %d Ready in %s; settling for one interval", o.n, benchenv.Since(t0))
	if err := sleep(ctx, o.interval); err != nil {
		return err
	}

	// The commit that touches one folder, found by polling.
	before, err := take(e, ctrl, wrap)
	if err != nil {
		return err
	}
	cpu := benchenv.TakeCPU()
	t1 := time.Now()
	second, err := e.Commit(repo, branch, tree(o.n, o.touch, 2), "touch "+folder(o.touch)+" only")
	if err != nil {
		return err
	}
	// Every Stack sees the commit within about one interval (plus jitter and
	// the shared listing's age); three are plenty when one up runs. A
	// controller that runs all n ups needs about as long as the first apply.
	seenWithin := max(3*o.interval+30*time.Second, firstApply*3/2)
	e.Logf("committed %s (touches %s/ only); waiting up to %s for all %d Stacks to be Ready at it", second[:12], folder(o.touch), seenWithin.Round(time.Second), o.n)
	seen, waitErr := e.WaitAllApplied(ctx, namespace, second, o.n, seenWithin, 30*time.Second, func(applied int) {
		e.Logf("  %d/%d Ready at the commit after %s", applied, o.n, benchenv.Since(t1))
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	seenAfter := time.Since(t1)
	if waitErr != nil {
		e.Logf("%v", waitErr)
	}
	// A Stack Ready at the commit has finished its up, if it ran one.
	after, err := take(e, ctrl, wrap)
	if err != nil {
		return err
	}
	commitPhase := after.sub(before)
	commitCPU := benchenv.CPUSince(cpu)
	quietCPU := benchenv.TakeCPU()

	// Then Git requests and operations per interval, nothing changing.
	e.Logf("counting Git requests over %d intervals of %s", o.intervals, o.interval)
	prev := after
	var perInterval []counts
	for i := 1; i <= o.intervals; i++ {
		if err := sleep(ctx, o.interval); err != nil {
			return err
		}
		now, err := take(e, ctrl, wrap)
		if err != nil {
			return err
		}
		perInterval = append(perInterval, now.sub(prev))
		e.Logf("  interval %d: Git %s; %.0f operations", i, now.sub(prev).git, now.sub(prev).ops)
		prev = now
	}
	quiet := prev.sub(after)
	quietCPULine := benchenv.CPUSince(quietCPU)

	fmt.Printf("\n== monorepo results: %d Stacks (folders s00..%s) in one repository, interval %s\n", o.n, folder(o.n-1), o.interval)
	fmt.Printf("the commit touching %s/ only: %d of %d Stacks Ready at it after %s\n", folder(o.touch), seen, o.n, seenAfter.Round(100*time.Millisecond))
	if waitErr != nil {
		fmt.Printf("PARTIAL: %d Stacks were not Ready at the commit within %s; operations still running then are counted in the intervals below\n", o.n-seen, seenWithin.Round(time.Second))
	}
	fmt.Printf("ups started: %.0f (stackpilot_operations_total{type=\"up\"}); `pulumi up` processes: %d (wrapper log); target 1\n",
		commitPhase.ups, commitPhase.wrapperUps)
	fmt.Printf("  all operations: %.0f; all pulumi processes: %d; ups skipped (stackpilot_ups_skipped_total, 0 where the controller has no such metric): %.0f\n",
		commitPhase.ops, commitPhase.procs, commitPhase.skipped)
	fmt.Printf("  Git while the commit was being seen: %s\n", commitPhase.git)
	fmt.Printf("  %s\n", commitCPU)
	fmt.Printf("\nafter the commit, nothing changing:\n")
	fmt.Printf("%-10s %10s %14s %14s %8s %11s %11s\n", "interval", "requests", "ref listings", "pack fetches", "other", "ls-remotes", "operations")
	for i, c := range perInterval {
		fmt.Printf("%-10d %10d %14d %14d %8d %11d %11.0f\n", i+1, c.git.Total(), c.git.Listings, c.git.Fetches, c.git.Others, c.git.Listings-c.git.Fetches, c.ops)
	}
	k := float64(o.intervals)
	fmt.Printf("%-10s %10.2f %14.2f %14.2f %8.2f %11.2f %11.2f\n", "per int.", float64(quiet.git.Total())/k, float64(quiet.git.Listings)/k,
		float64(quiet.git.Fetches)/k, float64(quiet.git.Others)/k, float64(quiet.git.Listings-quiet.git.Fetches)/k, quiet.ops/k)
	fmt.Printf("Git requests per interval: %.2f, target 1 (one shared ls-remote for all %d Stacks)\n", float64(quiet.git.Total())/k, o.n)
	total := prev.sub(before)
	fmt.Printf("ups from the commit to the end: %.0f (metric), %d `pulumi up` processes (wrapper log); target 1\n", total.ups, total.wrapperUps)
	fmt.Println(quietCPULine)
	fmt.Printf("load average at the end: %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
