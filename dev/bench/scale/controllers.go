package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// shardKey is the label Flux's sharding uses, and so Stackpilot's.
const shardKey = "sharding.fluxcd.io/key"

// member is one controller of the fleet: the only one, the main controller
// beside the shards, or one shard.
type member struct {
	name     string
	selector string // --watch-label-selector; "" for the only controller
	stacks   int    // how many of the fleet's Stacks it serves
	pprof    string // its --pprof-bind-address
	*benchenv.Controller
}

// fleet is the controllers that serve the benchmark's Stacks.
type fleet []*member

// shardOf is the shard Stack i is labelled for: shard1..shardN round-robin,
// "" when the fleet has one controller.
func shardOf(i, shards int) string {
	if shards == 0 {
		return ""
	}
	return fmt.Sprintf("shard%d", i%shards+1)
}

// members says which controllers run: one with no selector, or, as
// `stackpilot install --shards N` sets them up, the main controller for the
// unlabelled Stacks (none here, so it shows what a controller with no Stacks
// costs beside the shards) and N shards.
func members(n, shards int) []*member {
	if shards == 0 {
		return []*member{{name: "controller", stacks: n}}
	}
	ms := []*member{{name: "main", selector: "!" + shardKey}}
	for k := 1; k <= shards; k++ {
		name := fmt.Sprintf("shard%d", k)
		count := 0
		for i := range n {
			if shardOf(i, shards) == name {
				count++
			}
		}
		ms = append(ms, &member{name: name, selector: fmt.Sprintf("%s in (%s)", shardKey, name), stacks: count})
	}
	return ms
}

// startFleet starts every member as its own process, each with its own data
// dir, log, metrics and pprof address; args go to all of them.
//
// With statePerStack the controllers' default backend is a directory per
// Stack ({namespace}/{name}) under the run's one state directory: Pulumi's
// file:// backend lists the whole directory of a project's stacks in every
// operation, so with the default (a directory per namespace) an up of one of
// 10,000 stacks costs more than a second of CPU more than an up of one of a
// few (the benchmark would measure Pulumi's listing, not Stackpilot). Every
// controller uses the same one, as shards share a backend in a cluster, so a
// kept fleet can be resharded (reshard.go).
func startFleet(ctx context.Context, e *benchenv.Env, n, shards int, statePerStack bool, args []string) (fleet, error) {
	var f fleet
	for _, m := range members(n, shards) {
		addr, err := testenv.FreeAddr()
		if err != nil {
			return nil, err
		}
		m.pprof = addr
		own := append([]string{"--pprof-bind-address=" + addr}, args...)
		if statePerStack {
			own = append(own, "--default-backend=file://"+filepath.Join(e.Tmp, "state")+"/{namespace}/{name}")
		}
		if m.selector != "" {
			own = append(own, "--watch-label-selector="+m.selector)
		}
		if m.Controller, err = e.StartNamedController(ctx, m.name, namespace, own...); err != nil {
			return nil, err
		}
		f = append(f, m)
	}
	return f, nil
}

// counters sums the members' Pulumi operations and reconciles.
func (f fleet) counters() (operations, reconciles float64, err error) {
	for _, m := range f {
		ops, recs, err := m.Counters()
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", m.name, err)
		}
		operations += ops
		reconciles += recs
	}
	return operations, reconciles, nil
}

// memory reads every member's memory, in fleet order.
func (f fleet) memory() ([]benchenv.Memory, error) {
	out := make([]benchenv.Memory, len(f))
	for i, m := range f {
		mem, err := m.Memory()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
		out[i] = mem
	}
	return out, nil
}

// totalRSS sums the RSS of a memory reading.
func totalRSS(ms []benchenv.Memory) int64 {
	var t int64
	for _, m := range ms {
		t += m.RSS
	}
	return t
}

// totalLive is the members' live Go heap together: the bytes of heap
// objects allocated, read right after a forced GC (measureIdle). The heap in
// use (whole spans) is coarser: a span part full of one kind of object counts
// whole.
func totalLive(ms []benchenv.Memory) int64 {
	var sum int64
	for _, m := range ms {
		sum += int64(m.HeapAlloc)
	}
	return sum
}

// largest is the member with the most Stacks: whose heap is worth a look.
func (f fleet) largest() *member {
	best := f[0]
	for _, m := range f {
		if m.stacks > best.stacks {
			best = m
		}
	}
	return best
}

// ownCPU is the CPU the members used themselves, summed: not their
// children's (runners and Pulumi).
func (f fleet) ownCPU() (time.Duration, error) {
	var sum time.Duration
	for _, m := range f {
		t, err := benchenv.ProcCPU(m.Pid())
		if err != nil {
			return 0, fmt.Errorf("%s: %w", m.name, err)
		}
		sum += t
	}
	return sum, nil
}
