// Command jobs measures the Job executor (issue 23) on the one-node cluster
// (dev/internal/cluster: real kubelet and containerd, a Pod network), with
// PostgreSQL on the Pod gateway as the state backend and the controller as
// a process on this machine, set up as the Job e2e tests set it up:
//
//  1. Start latency: the same one-ConfigMap Pulumi YAML Stack applied -n
//     times with the Local executor and -n times with the Job executor,
//     alternating, on the same cluster, backend and controller, after a
//     warm-up apply each (the Job's pulls the images into the node). Each
//     run patches a config value of the Stack (the ConfigMap's data); from
//     that patch it times the operation's start in status, for a Job its
//     Pod's creation and Running, the first byte of its engine log, and
//     Ready. Target: the Job adds at most 2 s.
//  2. -stacks Job Stacks created at once on a freshly started controller:
//     the wall time until all are Ready, the controller's peak RSS (VmHWM),
//     the most Jobs active at once against --max-concurrent-jobs, and
//     PASS/FAIL lines for what must hold afterwards (one up each, no Job,
//     runner Pod or per-operation Secret left).
//
// It prints numbers and asserts nothing about time. It needs root and the
// cluster's requirements (containerd, runc, the CNI plugins, PostgreSQL), as
// the cluster tests do, and says SKIPPED without them; it waits for the
// machine's cluster lock while a test holds it.
//
//	go -C dev run ./bench/jobs [-n 5] [-stacks 50] [-max-concurrent-jobs 0] [-concurrent-operations 0] [-timeout 15m] [-v] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

const branch = "main"

type options struct {
	runs, stacks           int
	maxJobs, concurrentOps int
	timeout                time.Duration
	verbose, keep          bool
	skipLatency, skipFleet bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	flag.IntVar(&o.runs, "n", 5, "operations timed per executor for the start latency")
	flag.IntVar(&o.stacks, "stacks", 50, "Job Stacks applied at once")
	flag.IntVar(&o.maxJobs, "max-concurrent-jobs", 0, "the controller's --max-concurrent-jobs (0: its default)")
	flag.IntVar(&o.concurrentOps, "concurrent-operations", 0, "the controller's --concurrent-operations (0: its default)")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "bound on one operation of the latency, and on the fleet's apply")
	flag.BoolVar(&o.skipLatency, "skip-latency", false, "only the fleet")
	flag.BoolVar(&o.skipFleet, "skip-fleet", false, "only the start latency")
	flag.BoolVar(&o.verbose, "v", false, "copy the controller's log to stderr")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (controller logs, data dir)")
	flag.Parse()
	// controller-runtime's client logs nothing the benchmark needs; without
	// a logger it prints a stack trace after 30 s (the lock's wait).
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "jobs: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	w := &world{out: os.Stdout, start: time.Now(), verbose: o.verbose, keep: o.keep}
	header(w)
	// As the cluster tests skip where they cannot run, so does this one:
	// `make bench` goes on with the others.
	if err := requirements(); err != nil {
		fmt.Fprintf(w.out, "SKIPPED: this machine cannot run the one-node cluster and PostgreSQL: %v\n", err)
		return nil
	}
	var args []string
	if o.maxJobs > 0 {
		args = append(args, fmt.Sprintf("--max-concurrent-jobs=%d", o.maxJobs))
	}
	args = append(args, benchenv.ConcurrencyArgs(o.concurrentOps)...)
	if err := w.setUp(ctx, args); err != nil {
		return err
	}
	defer w.close()
	w.logf("cluster up in %s, images pushed in %s", w.clusterUpFor.Round(100*time.Millisecond), w.imagesPushedFor.Round(100*time.Millisecond))

	if !o.skipLatency {
		if err := w.measureLatency(ctx, o.runs, o.timeout); err != nil {
			w.tailControllerLog()
			return err
		}
	}
	if !o.skipFleet {
		if err := w.measureFleet(ctx, o.stacks, o.timeout); err != nil {
			w.tailControllerLog()
			return err
		}
	}
	fmt.Fprintf(w.out, "\ntotal %s; load average (1/5/15 min) now: %s\n", benchenv.Since(w.start), benchenv.LoadAvg())
	return nil
}

func header(w *world) {
	fmt.Fprintln(w.out, "== the Job executor on the one-node cluster: start latency against Local, and Stacks applying at once")
	fmt.Fprintf(w.out, "machine: %s\n", benchenv.Machine())
	fmt.Fprintf(w.out, "load average (1/5/15 min): %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
}

func (w *world) tailControllerLog() {
	if w.ctrl == nil {
		return
	}
	if logs, err := w.ctrl.Logs(); err == nil {
		fmt.Fprintf(os.Stderr, "controller log (tail):\n%s\n", tail(logs, 40))
	}
}

func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}

func scheme() *runtime.Scheme { return benchenv.Scheme() }

// env is benchenv's Stack helpers on this cluster's client.
func (w *world) env() *benchenv.Env {
	return &benchenv.Env{Client: w.k, Out: w.out, Poll: time.Second}
}

func (w *world) countApplied(ctx context.Context, ns, commit string) (applied, total int, notReady []string, err error) {
	return w.env().CountApplied(ctx, ns, commit)
}
