package jitter

import (
	"math"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestNewValidates(t *testing.T) {
	g := NewWithT(t)
	for _, p := range []int{0, 1, 10, 99} {
		j, err := New(p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(j.Percentage()).To(Equal(p))
	}
	for _, p := range []int{-1, 100, 250} {
		_, err := New(p)
		g.Expect(err).To(MatchError(ContainSubstring("between 0 and 99 percent")), "%d", p)
	}
}

// Many Stacks with one interval: their requeues cover [1, 1.1] × interval,
// evenly, and never leave it.
func TestApplySpreadsWithinBounds(t *testing.T) {
	g := NewWithT(t)
	j, err := New(10)
	g.Expect(err).NotTo(HaveOccurred())
	const interval = 10 * time.Minute
	lo, hi := 10*time.Minute, 11*time.Minute
	var buckets [10]int
	minSeen, maxSeen := hi, lo
	const n = 10000
	for range n {
		d := j.Apply(interval)
		g.Expect(d).To(And(BeNumerically(">=", lo), BeNumerically("<=", hi)))
		minSeen, maxSeen = min(minSeen, d), max(maxSeen, d)
		buckets[min(int((d-lo)*10/(hi-lo)), 9)]++
	}
	for i, c := range buckets {
		// Uniform: about n/10 in each tenth of the range.
		g.Expect(c).To(BeNumerically("~", n/10, n/25), "bucket %d of %v", i, buckets)
	}
	g.Expect(minSeen).To(BeNumerically("<", lo+interval/100))
	g.Expect(maxSeen).To(BeNumerically(">", hi-interval/100))
}

// The extremes of the source land exactly on the bounds.
func TestApplyBoundsExactly(t *testing.T) {
	g := NewWithT(t)
	j, _ := New(10)
	const interval = time.Minute
	g.Expect(j.WithSource(func(int64) int64 { return 0 }).Apply(interval)).To(Equal(60 * time.Second))
	g.Expect(j.WithSource(func(n int64) int64 { return n - 1 }).Apply(interval)).To(Equal(66 * time.Second))
}

func TestZeroIsExact(t *testing.T) {
	g := NewWithT(t)
	for _, j := range []Interval{{}, must(New(0))} {
		for _, d := range []time.Duration{time.Second, 10 * time.Minute, 100 * time.Hour} {
			g.Expect(j.Apply(d)).To(Equal(d))
		}
	}
}

func TestLargeIntervalsDoNotOverflow(t *testing.T) {
	g := NewWithT(t)
	j, _ := New(99)
	d := time.Duration(1<<62) + 12345
	g.Expect(j.WithSource(func(n int64) int64 { return n - 1 }).Apply(d)).To(BeNumerically(">", d))
	huge := time.Duration(math.MaxInt64 - 10)
	g.Expect(j.WithSource(func(n int64) int64 { return n - 1 }).Apply(huge)).To(Equal(time.Duration(math.MaxInt64)), "saturates")
	g.Expect(j.Apply(50 * time.Nanosecond)).To(BeNumerically(">", 0))
}

func must(j Interval, err error) Interval {
	if err != nil {
		panic(err)
	}
	return j
}
