package main

import (
	"context"
	"fmt"
	"time"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

// mark is what the counters stood at when a phase began.
type mark struct {
	calls           int
	ops, reconciles float64
	ctrlCPU         time.Duration
	cpu             benchenv.CPUSnapshot
	git             benchenv.GitCounts
}

// phase is what happened between a mark and its end.
type phase struct {
	calls           []benchenv.Call // pulumi processes, from the wrapper's log
	ops, reconciles float64         // from the controllers' metrics
	ctrlCPU         time.Duration   // the controllers' own CPU
	treeCPU, busy   time.Duration   // this benchmark's process tree; the machine
	wall            time.Duration
	cpuLine         string // benchenv.CPUSince
	byProcess       string // benchenv.CPUByProcess
	git             benchenv.GitCounts
}

// phaseStart marks where the counters stand, so that end can say what the
// phase added; a counter that cannot be read fails the run rather than
// print a wrong difference.
func phaseStart(e *benchenv.Env, f fleet, w *benchenv.Wrapper) (*mark, error) {
	m := &mark{cpu: benchenv.TakeCPU(), git: e.GitCounts()}
	var err error
	if m.calls, err = w.Count(); err != nil {
		return nil, err
	}
	if m.ops, m.reconciles, err = f.counters(); err != nil {
		return nil, err
	}
	if m.ctrlCPU, err = f.ownCPU(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *mark) end(f fleet, w *benchenv.Wrapper) (phase, error) {
	p := phase{cpuLine: benchenv.CPUSince(m.cpu), byProcess: benchenv.CPUByProcess(m.cpu)}
	p.treeCPU, p.busy, p.wall = benchenv.CPUUsed(m.cpu)
	calls, err := w.CallsFrom(m.calls)
	if err != nil {
		return p, err
	}
	p.calls = calls
	ops, recs, err := f.counters()
	if err != nil {
		return p, err
	}
	p.ops, p.reconciles = ops-m.ops, recs-m.reconciles
	cpu, err := f.ownCPU()
	if err != nil {
		return p, err
	}
	p.ctrlCPU = cpu - m.ctrlCPU
	return p, nil
}

// pulumiCPU is the CPU of the phase's pulumi process trees.
func (p phase) pulumiCPU() time.Duration {
	var t time.Duration
	for _, c := range p.calls {
		t += c.CPU()
	}
	return t
}

// idle is an idle measurement: what ran and the memory at its end.
type idle struct {
	phase
	d   time.Duration
	mem []benchenv.Memory
}

// measureIdle lets the fleet be for d (after 30 s for the last statuses and
// events to settle) and reads what ran, the Git requests and the memory,
// after a garbage collection in each controller.
func measureIdle(ctx context.Context, e *benchenv.Env, f fleet, w *benchenv.Wrapper, d time.Duration) (idle, error) {
	if err := benchenv.Sleep(ctx, 30*time.Second); err != nil {
		return idle{}, err
	}
	e.Logf("idle for %s", d)
	m, err := phaseStart(e, f, w)
	if err != nil {
		return idle{}, err
	}
	if err := benchenv.Sleep(ctx, d); err != nil {
		return idle{}, err
	}
	p, err := m.end(f, w)
	if err != nil {
		return idle{}, err
	}
	p.git = e.GitCounts().Sub(m.git)
	for _, m := range f { // the heap in use read next is then what is live
		if err := benchenv.ForceGC(ctx, m.pprof); err != nil {
			return idle{}, fmt.Errorf("%s: %w", m.name, err)
		}
	}
	mem, err := f.memory()
	if err != nil {
		return idle{}, err
	}
	for i, m := range f {
		e.Logf("  %s after %s idle: %s; %.0f reconciles, %.0f operations, Git %d requests in all", m.name, d, mem[i], p.reconciles, p.ops, p.git.Total())
	}
	return idle{phase: p, d: d, mem: mem}, nil
}
