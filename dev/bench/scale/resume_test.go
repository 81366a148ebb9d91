package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLoadFleetKeepsAGivenConcurrency: -resume takes the kept run's layout,
// but a -concurrent-operations given on the command line wins, so that a
// kept fleet can be measured again with fewer operations at once.
func TestLoadFleetKeepsAGivenConcurrency(t *testing.T) {
	dir := t.TempDir()
	data, err := json.Marshal(keptFleet{N: 2000, Shards: 4, Concurrency: 0, Interval: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fleetFile), data, 0o644); err != nil {
		t.Fatal(err)
	}

	kept := options{concurrency: 3}
	if _, err := loadFleet(dir, &kept); err != nil {
		t.Fatal(err)
	}
	if kept.concurrency != 0 || kept.n != 2000 || kept.shards != 4 {
		t.Errorf("not given: want the kept run's concurrency 0, n 2000, shards 4; got %d, %d, %d", kept.concurrency, kept.n, kept.shards)
	}

	given := options{concurrency: 1, concurrencyGiven: true}
	if _, err := loadFleet(dir, &given); err != nil {
		t.Fatal(err)
	}
	if given.concurrency != 1 || given.n != 2000 {
		t.Errorf("given: want concurrency 1 and the kept n 2000; got %d, %d", given.concurrency, given.n)
	}
}

// TestBranchHead: -resume reads the kept branch from a loose ref, else from
// packed-refs, and says so when neither holds it.
func TestBranchHead(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "git", repo+".git")
	if err := os.MkdirAll(filepath.Join(bare, "refs", "heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := branchHead(dir); err == nil {
		t.Fatal("no ref at all: want an error")
	}
	packed := "# pack-refs with: peeled fully-peeled sorted\nbbbb refs/heads/other\naaaa refs/heads/" + branch + "\n"
	if err := os.WriteFile(filepath.Join(bare, "packed-refs"), []byte(packed), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := branchHead(dir); err != nil || got != "aaaa" {
		t.Fatalf("packed: got %q, %v; want aaaa", got, err)
	}
	if err := os.WriteFile(filepath.Join(bare, "refs", "heads", branch), []byte("cccc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := branchHead(dir); err != nil || got != "cccc" {
		t.Fatalf("loose: got %q, %v; want cccc (a loose ref is newer than packed-refs)", got, err)
	}
}
