package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

// A fleet of 10,000 takes about two hours to create on two cores and the
// commit about one more: more than one sitting. A run with -keep leaves its
// directory (the control plane's data, the repositories, each controller's
// data and state) with fleetFile in it; -resume starts all of it again and
// goes on from the fleet as it was: a restart of the controllers with every
// Stack Ready, then the idle measurement and the commit.

// fleetFile is what -resume needs to know about the kept run.
const fleetFile = "fleet.json"

// keptFleet is fleetFile's content.
type keptFleet struct {
	N           int               `json:"n"`
	Shards      int               `json:"shards"`
	Concurrency int               `json:"concurrentOperations"`
	Interval    time.Duration     `json:"interval"`
	Drift       time.Duration     `json:"driftInterval"`
	SharedState bool              `json:"sharedStateDir"`
	GitAddr     string            `json:"gitAddress"`
	Commit      string            `json:"commit"`  // what every created Stack is Ready at
	Run         int               `json:"run"`     // the program's run number at Commit
	Created     int               `json:"created"` // how many are (the rest suspended)
	Base        []benchenv.Memory `json:"base"`    // each controller with no Stacks, fleet order
}

// saveFleet writes fleetFile into the run's directory, once the fleet is
// created and again after each commit it applied.
func saveFleet(e *benchenv.Env, o options, commit string, created int, base []benchenv.Memory, run int) error {
	u, err := url.Parse(e.Git.URL(repo))
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(keptFleet{N: o.n, Shards: o.shards, Concurrency: o.concurrency,
		Interval: o.interval, Drift: o.drift, SharedState: o.sharedState, GitAddr: u.Host,
		Commit: commit, Run: run, Created: created, Base: base}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.Tmp, fleetFile), data, 0o644)
}

// loadFleet reads the fleetFile of a kept run and makes o describe its fleet.
func loadFleet(dir string, o *options) (keptFleet, error) {
	var k keptFleet
	data, err := os.ReadFile(filepath.Join(dir, fleetFile))
	if err != nil {
		return k, fmt.Errorf("-resume %s: %w (resume the directory a run with -keep printed, after its creation)", dir, err)
	}
	if err := json.Unmarshal(data, &k); err != nil {
		return k, fmt.Errorf("-resume %s: %s: %w", dir, fleetFile, err)
	}
	o.n, o.shards, o.interval, o.drift, o.sharedState = k.N, k.Shards, k.Interval, k.Drift, k.SharedState
	if !o.concurrencyGiven {
		o.concurrency = k.Concurrency
	}
	if o.idle == 0 {
		o.idle = 2 * o.interval
	}
	return k, nil
}

// awaitRestart waits until the controllers, started on a fleet that exists,
// have reconciled each of its created Stacks at least once (their reconcile
// counters, which start at zero, reach it), then 30 s more for what those
// reconciles started.
func awaitRestart(ctx context.Context, e *benchenv.Env, f fleet, created int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	start, last := time.Now(), time.Now()
	for {
		_, recs, err := f.counters()
		if err != nil {
			return err
		}
		if recs >= float64(created) {
			e.Logf("  every controller's reconciles together reached %.0f (of %d Stacks) in %s", recs, created, benchenv.Since(start))
			return benchenv.Sleep(ctx, 30*time.Second)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("restart: %.0f reconciles of %d Stacks within %s", recs, created, timeout)
		}
		if time.Since(last) >= time.Minute {
			e.Logf("  restart: %.0f reconciles after %s", recs, time.Since(start).Round(time.Second))
			last = time.Now()
		}
		if err := benchenv.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// branchHead reads the commit the kept Git server's branch points at, from
// the bare repository under dir/git: a loose ref, else packed-refs.
func branchHead(dir string) (string, error) {
	bare := filepath.Join(dir, "git", repo+".git")
	ref := "refs/heads/" + branch
	if b, err := os.ReadFile(filepath.Join(bare, ref)); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	b, err := os.ReadFile(filepath.Join(bare, "packed-refs"))
	if err != nil {
		return "", fmt.Errorf("read the branch %s of %s: %w", branch, bare, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hash, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == ref {
			return hash, nil
		}
	}
	return "", fmt.Errorf("no branch %s in %s", branch, bare)
}
