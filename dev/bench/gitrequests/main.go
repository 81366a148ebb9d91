// Command gitrequests counts what many Stacks following one repository cost
// the Git server: n Stacks with the same url and branch and a short interval,
// all Ready, then the server's HTTP requests over a few intervals.
//
// The design promises about one ls-remote (GET info/refs) per interval,
// shared across the Stacks, and no clone (POST git-upload-pack) while nothing
// changed; and no Pulumi run either.
//
//	go -C dev run ./bench/gitrequests [-n 100] [-interval 20s] [-intervals 3]
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
	namespace = "bench-git"
	repo      = "shared"
	branch    = "main"
	dir       = "app"
)

const program = `name: shared
runtime: yaml
outputs:
  message: shared
`

type options struct {
	n           int
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
	flag.IntVar(&o.n, "n", 100, "Number of Stacks on the one repository.")
	flag.DurationVar(&o.interval, "interval", 20*time.Second, "The Stacks' spec.interval.")
	flag.IntVar(&o.intervals, "intervals", 3, "How many intervals to count requests over.")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "How long to wait for all Stacks to be Ready.")
	flag.IntVar(&o.concurrency, "concurrent-operations", 4, "The controller's --concurrent-operations.")
	flag.BoolVar(&o.verbose, "v", false, "Copy the controller's log to stderr.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/gitrequests:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "gitrequests", fmt.Sprintf("gitrequests: Git requests per interval, %d Stacks on one repository", o.n), os.Stdout)
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, o.keep
	defer e.Close()

	if err := e.Namespace(ctx, namespace); err != nil {
		return err
	}
	commit, err := e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": program}, "shared program")
	if err != nil {
		return err
	}
	ctrl, err := e.StartController(ctx, namespace, fmt.Sprintf("--concurrent-operations=%d", o.concurrency))
	if err != nil {
		return err
	}
	for i := range o.n {
		s, err := benchenv.StackSpec{
			Namespace: namespace, Name: fmt.Sprintf("shared-%03d", i),
			URL: e.Git.URL(repo), Branch: branch, Dir: dir,
			Interval: o.interval,
		}.Stack()
		if err != nil {
			return err
		}
		if err := e.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("create Stack %d: %w", i, err)
		}
	}
	e.Logf("created %d Stacks on %s (branch %s, interval %s); waiting for all to be Ready", o.n, e.Git.URL(repo), branch, o.interval)
	t0 := time.Now()
	if _, err := e.WaitAllApplied(ctx, namespace, commit, o.n, o.timeout, 30*time.Second, func(applied int) {
		e.Logf("  %d/%d Ready after %s; Git so far: %s", applied, o.n, benchenv.Since(t0), e.GitCounts())
	}); err != nil {
		return fmt.Errorf("%w (controller log: %s)", err, ctrl.LogPath)
	}
	e.Logf("all %d Ready in %s; Git so far: %s", o.n, benchenv.Since(t0), e.GitCounts())

	// One interval for the Stacks that were applied last to reach their
	// steady rhythm, then count.
	e.Logf("settling for one interval (%s), then counting over %d intervals", o.interval, o.intervals)
	if err := sleep(ctx, o.interval); err != nil {
		return err
	}
	ops0, reconciles0, err := ctrl.Counters()
	if err != nil {
		return err
	}
	cpu := benchenv.TakeCPU()
	start := e.GitCounts()
	prev := start
	var perInterval []benchenv.GitCounts
	for i := 1; i <= o.intervals; i++ {
		if err := sleep(ctx, o.interval); err != nil {
			return err
		}
		now := e.GitCounts()
		perInterval = append(perInterval, now.Sub(prev))
		e.Logf("  interval %d: %s", i, now.Sub(prev))
		prev = now
	}
	total := prev.Sub(start)
	ops, reconciles, err := ctrl.Counters()
	if err != nil {
		return err
	}
	ops -= ops0
	reconciles -= reconciles0
	applied, all, _, err := e.CountApplied(ctx, namespace, commit)
	if err != nil {
		return err
	}
	cpuLine := benchenv.CPUSince(cpu)

	fmt.Printf("\n== gitrequests results: %d Stacks, one repository and branch, interval %s, counted over %d intervals (%s)\n",
		o.n, o.interval, o.intervals, time.Duration(o.intervals)*o.interval)
	fmt.Printf("%-10s %10s %14s %14s %8s %11s\n", "interval", "requests", "ref listings", "pack fetches", "other", "ls-remotes")
	for i, c := range perInterval {
		fmt.Printf("%-10d %10d %14d %14d %8d %11d\n", i+1, c.Total(), c.Listings, c.Fetches, c.Others, c.Listings-c.Fetches)
	}
	k := float64(o.intervals)
	fmt.Printf("%-10s %10.2f %14.2f %14.2f %8.2f %11.2f\n", "per int.", float64(total.Total())/k, float64(total.Listings)/k,
		float64(total.Fetches)/k, float64(total.Others)/k, float64(total.Listings-total.Fetches)/k)
	fmt.Printf("per Stack per interval: %.3f requests (one ls-remote per Stack, unshared, would be %d per interval)\n",
		float64(total.Total())/k/float64(o.n), o.n)
	fmt.Printf("reconciles while counting: %.0f (%.1f per interval, with %d Stacks)\n", reconciles, reconciles/k, o.n)
	fmt.Printf("Pulumi operations while counting: %.0f; Stacks still Ready at %s: %d of %d\n", ops, commit[:12], applied, all)
	fmt.Printf("(over smart HTTP an ls-remote is one GET info/refs; a clone or fetch is a GET info/refs plus a POST\n")
	fmt.Printf(" git-upload-pack, so ls-remotes = ref listings - pack fetches; 0 pack fetches: nothing was cloned again)\n")
	fmt.Println(cpuLine)
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
