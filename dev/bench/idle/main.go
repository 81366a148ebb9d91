// Command idle measures the controller's memory with many idle Stacks: its
// RSS (VmRSS) and peak RSS (VmHWM) from /proc/<pid>/status and the Go heap from
// its metrics endpoint, before any Stack exists, once n Stacks are Ready, and
// after they have been idle for a while.
//
// The Stacks run a trivial Pulumi YAML program (outputs only, no provider), so
// that applying them is quick, and have an interval long enough that nothing
// runs while memory is measured. If not all of them are Ready within -timeout,
// the rest are suspended, the numbers are taken with what completed, and a
// linear extrapolation to n is printed, labelled as such.
//
//	go -C dev run ./bench/idle [-n 500] [-idle 1m] [-timeout 60m] [-concurrent-operations 4]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

const (
	namespace = "bench-idle"
	repo      = "idle"
	branch    = "main"
	dir       = "app"
)

// program has outputs only: no provider, no resources besides the stack.
const program = `name: idle
runtime: yaml
outputs:
  message: idle
`

type options struct {
	n           int
	idle        time.Duration
	interval    time.Duration
	timeout     time.Duration
	concurrency int
	verbose     bool
	keep        bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	flag.IntVar(&o.n, "n", 500, "Number of Stacks.")
	flag.DurationVar(&o.idle, "idle", time.Minute, "How long to stay idle after all are Ready before the second measurement.")
	flag.DurationVar(&o.interval, "interval", 24*time.Hour, "The Stacks' spec.interval: long, so that they stay idle.")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "How long to wait for all Stacks to be Ready before measuring with what completed.")
	flag.IntVar(&o.concurrency, "concurrent-operations", 4, "The controller's --concurrent-operations.")
	flag.BoolVar(&o.verbose, "v", false, "Copy the controller's log to stderr.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/idle:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "idle", fmt.Sprintf("idle: controller memory with %d idle Stacks", o.n), os.Stdout)
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, o.keep
	defer e.Close()

	if err := e.Namespace(ctx, namespace); err != nil {
		return err
	}
	commit, err := e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": program}, "idle program")
	if err != nil {
		return err
	}
	ctrl, err := e.StartController(ctx, namespace, fmt.Sprintf("--concurrent-operations=%d", o.concurrency))
	if err != nil {
		return err
	}
	if err := sleep(ctx, 10*time.Second); err != nil {
		return err
	}
	base, err := ctrl.Memory()
	if err != nil {
		return err
	}
	e.Logf("controller with no Stacks: %s", base)

	t0 := time.Now()
	for i := range o.n {
		s, err := benchenv.StackSpec{
			Namespace: namespace, Name: fmt.Sprintf("idle-%04d", i),
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
	e.Logf("created %d Stacks in %s (interval %s); waiting for all to be Ready (at most %s)", o.n, benchenv.Since(t0), o.interval, o.timeout)

	cpu := benchenv.TakeCPU()
	applyStart := time.Now()
	ready, waitErr := e.WaitAllApplied(ctx, namespace, commit, o.n, o.timeout, 30*time.Second, func(applied int) {
		m, _ := ctrl.Memory()
		e.Logf("  %d/%d Ready after %s (%.1f Stacks/min); controller %s", applied, o.n, benchenv.Since(applyStart),
			float64(applied)/time.Since(applyStart).Minutes(), m)
	})
	applyTime := time.Since(applyStart)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	partial := waitErr != nil
	if partial {
		e.Logf("%v", waitErr)
		if ready == 0 {
			return fmt.Errorf("no Stack became Ready (controller log: %s)", ctrl.LogPath)
		}
		e.Logf("suspending the Stacks that are not Ready, and waiting 30s for operations in flight")
		if err := suspendNotReady(ctx, e, commit); err != nil {
			return err
		}
		if err := sleep(ctx, 30*time.Second); err != nil {
			return err
		}
		if ready, _, _, err = e.CountApplied(ctx, namespace, commit); err != nil {
			return err
		}
	}
	applyCPU := benchenv.CPUSince(cpu)
	e.Logf("%d/%d Ready in %s (%.1f Stacks/min)", ready, o.n, benchenv.Since(applyStart), float64(ready)/applyTime.Minutes())

	atReady, err := ctrl.Memory()
	if err != nil {
		return err
	}
	opsAtReady, reconcilesAtReady, err := ctrl.Counters()
	if err != nil {
		return err
	}
	gitAtReady := e.GitCounts()
	e.Logf("all Ready: %s; %.0f Pulumi operations so far", atReady, opsAtReady)

	e.Logf("idle for %s", o.idle)
	idleCPU := benchenv.TakeCPU()
	if err := sleep(ctx, o.idle); err != nil {
		return err
	}
	afterIdle, err := ctrl.Memory()
	if err != nil {
		return err
	}
	opsIdle, reconcilesIdle, err := ctrl.Counters()
	if err != nil {
		return err
	}
	opsIdle -= opsAtReady
	reconcilesIdle -= reconcilesAtReady
	gitIdle := e.GitCounts().Sub(gitAtReady)
	idleCPULine := benchenv.CPUSince(idleCPU)

	fmt.Printf("\n== idle results: %d Stacks (trivial program, interval %s), controller --concurrent-operations=%d\n", ready, o.interval, o.concurrency)
	if partial {
		fmt.Printf("PARTIAL: only %d of %d Stacks were Ready within %s; the other %d are suspended (still in the controller's cache)\n", ready, o.n, o.timeout, o.n-ready)
	}
	fmt.Printf("applying %d Stacks took %s (%.1f Stacks/min, %.0f Pulumi operations)\n", ready, applyTime.Round(time.Second), float64(ready)/applyTime.Minutes(), opsAtReady)
	fmt.Printf("  %s\n", applyCPU)
	fmt.Printf("%-26s %s\n", "no Stacks:", base)
	fmt.Printf("%-26s %s\n", "all Ready:", atReady)
	fmt.Printf("%-26s %s\n", fmt.Sprintf("after %s idle:", o.idle), afterIdle)
	fmt.Printf("while idle: %.0f reconciles, %.0f Pulumi operations, Git %s\n", reconcilesIdle, opsIdle, gitIdle)
	fmt.Printf("  %s\n", idleCPULine)
	perStack := float64(afterIdle.RSS-base.RSS) / float64(ready)
	fmt.Printf("RSS per idle Stack (after idle - no Stacks) / %d: %.1f KiB", ready, perStack/1024)
	if afterIdle.HeapInuse >= 0 && base.HeapInuse >= 0 {
		fmt.Printf("; Go heap in use per Stack: %.1f KiB", (afterIdle.HeapInuse-base.HeapInuse)/float64(ready)/1024)
	}
	fmt.Println()
	if partial {
		fmt.Printf("EXTRAPOLATED (linear, from %d to %d Stacks): RSS ≈ %s", ready, o.n, benchenv.MiB(base.RSS+int64(perStack*float64(o.n))))
		if afterIdle.HeapInuse >= 0 && base.HeapInuse >= 0 {
			fmt.Printf(", Go heap in use ≈ %s", benchenv.MiB(int64(base.HeapInuse+(afterIdle.HeapInuse-base.HeapInuse)/float64(ready)*float64(o.n))))
		}
		fmt.Printf("; applying all %d at this rate ≈ %s\n", o.n, time.Duration(float64(applyTime)*float64(o.n)/float64(ready)).Round(time.Minute))
	}
	fmt.Printf("peak RSS (VmHWM) is the peak over the whole run, applies included, not an idle figure\n")
	fmt.Printf("load average at the end: %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
	return nil
}

// suspendNotReady sets spec.suspend on every Stack not applied at commit.
func suspendNotReady(ctx context.Context, e *benchenv.Env, commit string) error {
	var list v1alpha1.StackList
	if err := e.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		s := &list.Items[i]
		if benchenv.Applied(s, commit) {
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Suspend = true
		if err := e.Client.Patch(ctx, s, patch); err != nil {
			return err
		}
	}
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
