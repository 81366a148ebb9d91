package stack

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestDriftPhaseSpreadsEvenly: 1,000 Stacks on an hour get 1,000 distinct
// phases 3.6 s apart, whatever their names.
func TestDriftPhaseSpreadsEvenly(t *testing.T) {
	g := NewWithT(t)
	var keys []string
	for i := range 1000 {
		keys = append(keys, fmt.Sprintf("team-%d/stack-%d", i%7, i))
	}
	seen := map[time.Duration]bool{}
	for _, k := range keys {
		p := driftPhase(k, keys, time.Hour)
		g.Expect(p).To(BeNumerically(">=", 0))
		g.Expect(p).To(BeNumerically("<", time.Hour))
		g.Expect(p % (3600 * time.Millisecond)).To(BeZero())
		seen[p] = true
	}
	g.Expect(seen).To(HaveLen(1000), "no two Stacks share a phase")
}

func TestDriftPhaseIsStableAndNotByName(t *testing.T) {
	g := NewWithT(t)
	peers := []string{"ns/a", "ns/b", "ns/c", "ns/d"}
	g.Expect(driftPhase("ns/b", peers, time.Hour)).To(Equal(driftPhase("ns/b", []string{"ns/d", "ns/c", "ns/b", "ns/a"}, time.Hour)),
		"the order of the list does not matter")
	g.Expect(driftPhase("ns/new", peers, time.Hour)).To(Equal(driftPhase("ns/new", append(peers, "ns/new"), time.Hour)),
		"a Stack not yet in the list counts itself")
	var phases []time.Duration
	for _, k := range peers {
		phases = append(phases, driftPhase(k, peers, time.Hour))
	}
	g.Expect(phases).NotTo(Equal([]time.Duration{0, 15 * time.Minute, 30 * time.Minute, 45 * time.Minute}),
		"ranks come from a hash, not from the names' order")
	g.Expect(phases).To(ConsistOf(time.Duration(0), 15*time.Minute, 30*time.Minute, 45*time.Minute))
}

func TestNextDriftCheck(t *testing.T) {
	g := NewWithT(t)
	epoch := time.Unix(0, 0)
	hour := time.Hour
	phase := 10 * time.Minute
	base := epoch.Add(1000*hour + 5*time.Minute) // xx:05
	// Earliest is xx:35; the slot is (xx+1):10.
	g.Expect(nextDriftCheck(base, phase, hour)).To(Equal(epoch.Add(1001*hour + 10*time.Minute)))
	// From a check at its own slot, the next is one interval later.
	at := epoch.Add(1001*hour + 10*time.Minute)
	g.Expect(nextDriftCheck(at, phase, hour)).To(Equal(at.Add(hour)))
	// A check that ran a little late still keeps the slot grid.
	g.Expect(nextDriftCheck(at.Add(3*time.Second), phase, hour)).To(Equal(at.Add(hour)))
	// Earliest exactly on a slot is that slot.
	g.Expect(nextDriftCheck(epoch.Add(1000*hour+40*time.Minute), phase, hour)).To(Equal(epoch.Add(1001*hour + 10*time.Minute)))
	// Always within [base+interval/2, base+1.5 interval].
	for i := range 200 {
		b := epoch.Add(time.Duration(i) * 7919 * time.Second)
		n := nextDriftCheck(b, phase, hour)
		g.Expect(n).To(BeTemporally(">=", b.Add(hour/2)))
		g.Expect(n).To(BeTemporally("<=", b.Add(3*hour/2)))
	}
}

// A fleet's reschedules list the Stacks once per interval and TTL, not once
// per Stack: the ranking is reused for driftRankingTTL, then read again; a
// listing that failed is not kept.
func TestDriftRankingsAreReused(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	d := &driftRankings{now: func() time.Time { return now }}
	lists := 0
	peers := []string{"ns/a", "ns/b", "ns/c"}
	list := func() ([]string, bool) { lists++; return peers, true }

	first := d.among(time.Hour, list)
	g.Expect(first).To(Equal(rankPeers(peers)))
	for range 100 {
		d.among(time.Hour, list)
	}
	g.Expect(lists).To(Equal(1), "one listing for a hundred reschedules within the TTL")

	d.among(2*time.Hour, list)
	g.Expect(lists).To(Equal(2), "each interval has its own peers")

	peers = append(peers, "ns/d")
	now = now.Add(driftRankingTTL)
	g.Expect(d.among(time.Hour, list)).To(Equal(rankPeers(peers)), "read again once the TTL has passed")
	g.Expect(lists).To(Equal(3))

	failed := func() ([]string, bool) { lists++; return nil, false }
	now = now.Add(driftRankingTTL)
	g.Expect(d.among(time.Hour, failed)).To(BeEmpty())
	g.Expect(d.among(time.Hour, list)).To(Equal(rankPeers(peers)), "a failed listing is not kept")
	g.Expect(lists).To(Equal(5))

	// A Stack not in the kept ranking still gets a slot of its own.
	g.Expect(phaseAmong("ns/e", rankPeers(peers), time.Hour)).To(Equal(driftPhase("ns/e", append(peers, "ns/e"), time.Hour)))
}
