// Package jitter spreads periodic requeues, so that objects created together
// (a thousand Stacks applied from one kustomization) do not all wake, list
// their repository and run together, interval after interval.
package jitter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// MaxPercentage is the largest jitter accepted: a Stack is checked at least
// every (1 + p %) × interval, and beyond twice the interval that is no longer
// "every interval".
const MaxPercentage = 99

// DefaultPercentage is the jitter of the controller's interval requeues.
const DefaultPercentage = 10

// Interval draws requeues uniformly from [d, d + p % of d] for an interval d.
//
// Why only later, where Flux draws from ±p %: Stacks share one Git listing per
// repository, reused while it is younger than the interval. A Stack that woke
// early would be served the listing it fetched itself at its previous wake,
// and so check its source only every other wake; moving the listing's bound
// down to the shortest requeue instead makes many Stacks on one repository
// list it once per 0.9 interval (measured 1.1 to 1.3 per interval). Drawn
// from [d, d + p %], every wake finds its own last listing expired and a
// listing another Stack fetched since is shared: one ls-remote per interval,
// and Stacks created together still drift apart by up to p % per interval.
// The zero value adds no jitter. It is safe for concurrent use.
type Interval struct {
	percent int
	// int64n returns a uniform value in [0, n); math/rand/v2's, which is
	// safe for concurrent use and seeded per process, unless a test sets it.
	int64n func(n int64) int64
}

// New returns an Interval that delays by up to percent % (never earlier), or
// an error that says what to fix when percent is not in 0..MaxPercentage.
// 0 disables jitter.
func New(percent int) (Interval, error) {
	if percent < 0 || percent > MaxPercentage {
		return Interval{}, fmt.Errorf("interval jitter must be between 0 and %d percent, got %d (0 disables it; 10 delays each requeue by up to 10 %% of spec.interval)", MaxPercentage, percent)
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

// Apply returns d delayed by a uniform amount in [0, p % of d]: never below d,
// never above d + p %, saturating at the largest duration.
func (j Interval) Apply(d time.Duration) time.Duration {
	s := j.spread(d)
	if s == 0 {
		return d
	}
	if s > math.MaxInt64-d {
		s = math.MaxInt64 - d
	}
	return d + time.Duration(j.int64n(int64(s)+1))
}
