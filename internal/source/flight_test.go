package source

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestFlightSharesOneCall(t *testing.T) {
	g := NewWithT(t)
	var fg FlightGroup[int]
	var calls atomic.Int32
	release := make(chan struct{})
	fn := func(context.Context) (int, error) {
		calls.Add(1)
		<-release
		return 42, nil
	}
	results := make(chan int, 10)
	for range 10 {
		go func() {
			v, _ := fg.Do(context.Background(), "k", fn)
			results <- v
		}()
	}
	g.Eventually(func() int {
		fg.mu.Lock()
		defer fg.mu.Unlock()
		if c := fg.calls["k"]; c != nil {
			return c.waiters
		}
		return 0
	}, 30*time.Second, 50*time.Millisecond).Should(Equal(10))
	close(release)
	for range 10 {
		g.Expect(<-results).To(Equal(42))
	}
	g.Expect(calls.Load()).To(Equal(int32(1)))
}

// One caller giving up must not fail the others; the last one leaving
// cancels the work.
func TestFlightCancelsOnlyWhenEveryoneLeft(t *testing.T) {
	g := NewWithT(t)
	var fg FlightGroup[string]
	started := make(chan struct{})
	cancelled := make(chan struct{})
	release := make(chan struct{})
	fn := func(ctx context.Context) (string, error) {
		close(started)
		select {
		case <-ctx.Done():
			close(cancelled)
			return "", ctx.Err()
		case <-release:
			return "done", nil
		}
	}

	ctx1, cancel1 := context.WithCancel(context.Background())
	err1 := make(chan error, 1)
	go func() { _, err := fg.Do(ctx1, "k", fn); err1 <- err }()
	<-started
	res2 := make(chan string, 1)
	go func() { v, _ := fg.Do(context.Background(), "k", fn); res2 <- v }()
	g.Eventually(func() int {
		fg.mu.Lock()
		defer fg.mu.Unlock()
		return fg.calls["k"].waiters
	}, 30*time.Second, 50*time.Millisecond).Should(Equal(2))

	cancel1()
	g.Expect(errors.Is(<-err1, context.Canceled)).To(BeTrue())
	g.Consistently(cancelled, 50*time.Millisecond).ShouldNot(BeClosed())
	close(release)
	g.Expect(<-res2).To(Equal("done"))

	// Alone, the caller's cancellation reaches the work.
	started = make(chan struct{})
	cancelled = make(chan struct{})
	release = make(chan struct{})
	ctx3, cancel3 := context.WithCancel(context.Background())
	go func() { <-started; cancel3() }()
	_, err := fg.Do(ctx3, "k", fn)
	g.Expect(errors.Is(err, context.Canceled)).To(BeTrue())
	g.Eventually(cancelled, 30*time.Second, 50*time.Millisecond).Should(BeClosed())
}
