package main

import (
	"fmt"
	"time"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

// results is everything the run measured, for print.
type results struct {
	o     options
	cores int
	floor floor
	ctrls fleet
	base  []benchenv.Memory // each controller with no Stacks

	created    int
	createTime time.Duration
	createErr  error
	create     phase

	run int // the program's run number the fleet is at: program(run)

	// -resume: the controllers restarted on the kept fleet, after relabelling
	// it from another layout when reshardedFrom is set.
	resumed       bool
	reshardedFrom string
	relabelTime   time.Duration
	restartTime   time.Duration
	restartErr    error
	restart       phase

	idle1   idle
	heapTop string

	commits []commitRound
}

// commitRound is one commit changing every Stack (-commits), and the idle
// measurement after it.
type commitRound struct {
	run          int    // the program's run number it committed
	commit       string // its Git commit
	done, wanted int
	took         time.Duration
	err          error
	phase        phase
	idle         idle
}

func (r results) print() {
	concurrency := "the controller's default"
	if r.o.concurrency > 0 {
		concurrency = fmt.Sprint(r.o.concurrency)
	}
	drift := "scheduled drift checks off"
	if r.o.drift > 0 {
		drift = "a drift check every " + r.o.drift.String()
	}
	state := "a file:// state directory per Stack"
	if r.o.sharedState {
		state = "one file:// state directory per namespace (the default)"
	}
	fmt.Printf("\n== scale results: %d trivial Stacks (no resource, two outputs) on %s, interval %s, %s, %s, --concurrent-operations %s, %d cores\n",
		r.o.n, layout(r.o), r.o.interval, drift, state, concurrency, r.cores)

	if r.resumed {
		r.printRestart()
	} else {
		r.printApply("creation to all Ready", r.created, r.o.n, r.createTime, r.createErr, r.create, r.floor.firstApply, "stack init + up")
	}
	if r.resumed {
		r.printIdle("idle after the restart", r.idle1)
	} else {
		r.printIdle("idle after creation", r.idle1)
	}
	if r.heapTop != "" {
		fmt.Printf("heap in use of %s after idle (go tool pprof -top -sample_index=inuse_space):\n%s\n", r.ctrls.largest().name, r.heapTop)
	}
	if r.o.skipCommit {
		fmt.Println("no commit phase (-skip-commit)")
	}
	before, since := r.idle1, "creation"
	if r.resumed {
		since = "the restart"
	}
	var commitErr error
	for i, c := range r.commits {
		r.printApply(fmt.Sprintf("commit %d of %d (run %d) changing every Stack, commit to all Ready", i+1, r.o.commits, c.run), c.done, c.wanted, c.took, c.err, c.phase, r.floor.up, "up")
		if c.err != nil {
			commitErr = c.err
			break
		}
		r.printIdle(fmt.Sprintf("idle after commit %d (one more history record per Stack)", i+1), c.idle)
		// The first operation of each Stack in a process costs once what a
		// later one does not (its metric series, the cached objects it
		// reads): only the growth after a later commit is history's.
		why := "history one record longer, plus whatever a Stack's first operation in this process costs once"
		if i > 0 {
			why = "history one record longer; once it holds its 10 records this must be about 0"
		}
		fmt.Printf("per-Stack RSS after commit %d minus after %s: %+.1f KiB; live Go heap after a GC: %+.2f KiB (%s)\n", i+1, since,
			float64(totalRSS(c.idle.mem)-totalRSS(before.mem))/float64(max(r.created, 1))/1024,
			float64(totalLive(c.idle.mem)-totalLive(before.mem))/float64(max(r.created, 1))/1024, why)
		before, since = c.idle, fmt.Sprintf("commit %d", i+1)
	}
	if !r.resumed && (r.o.n < 10000 || r.createErr != nil || commitErr != nil) {
		scale := 10000 / float64(max(r.created, 1))
		fmt.Printf("ESTIMATE for -n 10000 (linear in the apply phases, from this run): creation %s", time.Duration(float64(r.createTime)*scale).Round(time.Minute))
		if len(r.commits) > 0 {
			c := r.commits[0]
			fmt.Printf(", a commit %s", time.Duration(float64(c.took)*10000/float64(max(c.done, 1))).Round(time.Minute))
		}
		fmt.Printf(", plus the idle measurements and the floor\n")
	}
	fmt.Printf("load average at the end: %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
}

// printApply prints an apply phase: its time against the floor (floorCPU per
// Stack × Stacks / cores), the controllers' share of the CPU, the pulumi
// processes and where the CPU went.
func (r results) printApply(what string, done, want int, took time.Duration, err error, p phase, floorCPU time.Duration, floorWhat string) {
	atLeast := ""
	if err != nil {
		atLeast = "at least "
		fmt.Printf("PARTIAL: %v; the time and ratio below are lower bounds (after creation the others were suspended: they stay in the controllers' caches, without an applied status)\n", err)
	}
	floor := time.Duration(float64(floorCPU) * float64(done) / float64(r.cores))
	fmt.Printf("%s: %s%s for %d of %d (%.1f Stacks/min)\n", what, atLeast, took.Round(time.Second), done, want, float64(done)/took.Minutes())
	fmt.Printf("  floor: bare %s CPU %s × %d / %d cores = %s; ratio to the floor %s%.2fx\n",
		floorWhat, benchenv.Seconds(floorCPU), done, r.cores, floor.Round(time.Second), atLeast, took.Seconds()/floor.Seconds())
	n := float64(max(done, 1))
	fmt.Printf("  pulumi processes: %d (%.2f per Stack), their CPU %.2fs per Stack; %.0f operations, %.0f reconciles (%.1f per Stack)\n",
		len(p.calls), float64(len(p.calls))/n, p.pulumiCPU().Seconds()/n, p.ops, p.reconciles, p.reconciles/n)
	fmt.Printf("  the controllers' own CPU: %s = %.1f %% of this benchmark's (%s)\n",
		benchenv.Seconds(p.ctrlCPU), benchenv.Pct(p.ctrlCPU, p.treeCPU), benchenv.Seconds(p.treeCPU))
	fmt.Printf("  %s\n  %s\n", p.byProcess, p.cpuLine)
}

// printRestart prints the restart of a kept fleet (-resume): how long until
// every Stack was reconciled, and what that ran.
func (r results) printRestart() {
	if r.restartErr != nil {
		fmt.Printf("PARTIAL: %v\n", r.restartErr)
	}
	p := r.restart
	if r.reshardedFrom != "" {
		fmt.Printf("resharded from %s: %d Stacks relabelled in %s before the controllers started\n",
			r.reshardedFrom, r.o.n, r.relabelTime.Round(100*time.Millisecond))
	}
	fmt.Printf("restart of the controllers with %d Stacks Ready (-resume): every Stack reconciled and Applied at the kept commit in %s (%.0f Stacks/s), 30 s settling included\n",
		r.created, r.restartTime.Round(time.Second), float64(r.created)/max(r.restartTime.Seconds()-30, 1))
	fmt.Printf("  %.0f reconciles, %.0f Pulumi operations, %d pulumi processes (goal: none when the fleet was kept at one commit; a stopped commit round's Stacks apply the kept commit again)\n", p.reconciles, p.ops, len(p.calls))
	fmt.Printf("  Git: %s (one repository: the goal is one listing)\n", p.git)
	fmt.Printf("  the controllers' own CPU: %s\n  %s\n  %s\n", benchenv.Seconds(p.ctrlCPU), p.byProcess, p.cpuLine)
}

// printIdle prints an idle measurement: what ran, the Git requests per
// interval and each controller's memory against its memory with no Stacks.
func (r results) printIdle(what string, in idle) {
	intervals := in.d.Seconds() / r.o.interval.Seconds()
	fmt.Printf("%s, over %s (%.1f intervals of %s):\n", what, in.d, intervals, r.o.interval)
	fmt.Printf("  %.0f reconciles (%.2f per Stack per interval), %.0f Pulumi operations, %d pulumi processes\n",
		in.reconciles, in.reconciles/float64(max(r.created, 1))/intervals, in.ops, len(in.calls))
	fmt.Printf("  Git: %s; %.2f per interval (one repository: the goal is one listing per interval)\n", in.git, float64(in.git.Total())/intervals)
	fmt.Printf("  %s\n  %s\n", in.byProcess, in.cpuLine)
	fmt.Printf("  %-10s %7s %12s %12s %12s %14s %12s %12s\n", "controller", "Stacks", "RSS none", "RSS idle", "per Stack", "Go heap in use", "live heap", "goroutines")
	// A base of zero was not measured (a resharded fleet's controllers never
	// ran without their Stacks): "-" instead of a made-up figure.
	for i, m := range r.ctrls {
		none, perStack, before := "-", "-", "-"
		if r.base[i].RSS > 0 {
			none, before = benchenv.MiB(r.base[i].RSS), fmt.Sprintf("%.0f", r.base[i].Goroutines)
			if m.stacks > 0 {
				perStack = fmt.Sprintf("%.1f KiB", float64(in.mem[i].RSS-r.base[i].RSS)/float64(m.stacks)/1024)
			}
		}
		fmt.Printf("  %-10s %7d %12s %12s %12s %14s %12s %5s → %4.0f\n", m.name, m.stacks, none, benchenv.MiB(in.mem[i].RSS),
			perStack, benchenv.MiB(int64(in.mem[i].HeapInuse)), benchenv.MiB(int64(in.mem[i].HeapAlloc)), before, in.mem[i].Goroutines)
	}
	if len(r.ctrls) > 1 {
		none, perStack := "-", "-"
		if base := totalRSS(r.base); base > 0 {
			none, perStack = benchenv.MiB(base), fmt.Sprintf("%.1f KiB", float64(totalRSS(in.mem)-base)/float64(r.o.n)/1024)
		}
		fmt.Printf("  %-10s %7d %12s %12s %12s\n", "all", r.o.n, none, benchenv.MiB(totalRSS(in.mem)), perStack)
	}
	largest := r.ctrls.largest()
	fmt.Printf("  the largest controller (%s) holds %s for %d Stacks: target at most 300 MiB for 10,000 on one controller\n",
		largest.name, benchenv.MiB(in.mem[indexOf(r.ctrls, largest)].RSS), largest.stacks)
}

func indexOf(f fleet, m *member) int {
	for i := range f {
		if f[i] == m {
			return i
		}
	}
	return 0
}
