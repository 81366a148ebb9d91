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
