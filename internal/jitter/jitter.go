// Package jitter spreads periodic requeues, so that objects created together
// (a thousand Stacks applied from one kustomization) do not all wake, list
// their repository and run together, interval after interval.
package jitter

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// MaxPercentage is the largest jitter accepted: at 100 % a requeue could be
// zero, which controller-runtime reads as "never", and a listing shared at
// the shortest requeue would never be reused.
const MaxPercentage = 99

// DefaultPercentage is the jitter of the controller's interval requeues.
const DefaultPercentage = 10

// Interval draws requeues uniformly from [d − p %, d + p %] of an interval d.
// The zero value adds no jitter. It is safe for concurrent use.
type Interval struct {
	percent int
	// int64n returns a uniform value in [0, n); math/rand/v2's, which is
	// safe for concurrent use and seeded per process, unless a test sets it.
	int64n func(n int64) int64
}

// New returns an Interval of ±percent %, or an error that says what to fix
// when percent is not in 0..MaxPercentage. 0 disables jitter.
func New(percent int) (Interval, error) {
	if percent < 0 || percent > MaxPercentage {
		return Interval{}, fmt.Errorf("interval jitter must be between 0 and %d percent, got %d (0 disables it; 10 spreads each requeue over ±10 %% of spec.interval)", MaxPercentage, percent)
	}
	return Interval{percent: percent, int64n: rand.Int64N}, nil
}

// WithSource returns a copy of j that draws from int64n (tests).
func (j Interval) WithSource(int64n func(n int64) int64) Interval {
	j.int64n = int64n
	return j
}

// Percentage returns the jitter in percent.
func (j Interval) Percentage() int { return j.percent }

// spread is p % of d, computed without overflowing for any duration.
func (j Interval) spread(d time.Duration) time.Duration {
	if j.percent == 0 || d <= 0 {
		return 0
	}
	p := time.Duration(j.percent)
	return d/100*p + d%100*p/100
}

// Apply returns d moved by a uniform amount in [−p %, +p %] of d. The result
// is never below Shortest(d), never above d + p %, and never zero for d > 0.
func (j Interval) Apply(d time.Duration) time.Duration {
	s := j.spread(d)
	if s == 0 {
		return d
	}
	return d - s + time.Duration(j.int64n(int64(2*s)+1))
}

// Shortest is the shortest requeue Apply(d) can return, d − p % of d. A
// cache that callers revisit every Apply(d) must count its entries stale
// after Shortest(d), not d: a caller that wakes early would otherwise be
// served the very answer it was served on its previous visit.
func (j Interval) Shortest(d time.Duration) time.Duration {
	return d - j.spread(d)
}
