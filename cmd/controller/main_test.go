package main

import (
	"runtime"
	"testing"
)

// The default of --concurrent-operations follows GOMAXPROCS, which Go sets
// from the container's CPU limit, and is never below 1.
func TestDefaultConcurrencyFollowsGOMAXPROCS(t *testing.T) {
	old := runtime.GOMAXPROCS(3)
	defer runtime.GOMAXPROCS(old)
	if got := defaultConcurrency(); got != 3 {
		t.Fatalf("defaultConcurrency() = %d with GOMAXPROCS 3", got)
	}
	runtime.GOMAXPROCS(1)
	if got := defaultConcurrency(); got != 1 {
		t.Fatalf("defaultConcurrency() = %d with GOMAXPROCS 1", got)
	}
}

// --artifact-max-size takes Kubernetes quantities and refuses what is not a
// positive byte count, saying how to write one.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"100Mi": 100 << 20, "1Gi": 1 << 30, "64Ki": 64 << 10, "1000": 1000, "1M": 1_000_000} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "0", "-1Mi", "0.5"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}
