package benchenv

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParallelCallsEachIndexOnceWithinTheBound(t *testing.T) {
	const n, parallel = 200, 4
	var mu sync.Mutex
	seen := map[int]int{}
	var running, most atomic.Int64
	err := Parallel(context.Background(), n, parallel, func(i int) error {
		now := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d indexes called, want %d", len(seen), n)
	}
	for i, c := range seen {
		if c != 1 || i < 0 || i >= n {
			t.Fatalf("index %d called %d times", i, c)
		}
	}
	if most.Load() > parallel {
		t.Fatalf("%d calls at once, want at most %d", most.Load(), parallel)
	}
}

func TestParallelStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int64
	err := Parallel(context.Background(), 1000, 2, func(i int) error {
		calls.Add(1)
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if calls.Load() > 20 {
		t.Fatalf("%d calls after an error at index 10 with 2 at a time: no new call should start", calls.Load())
	}
}
