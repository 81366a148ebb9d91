package stack

import (
	"hash/fnv"
	"sort"
	"sync"
	"time"
)

// Drift checks are spread over their interval: each Stack checks at a fixed
// phase of it, and the phases of the Stacks sharing an interval are evenly
// apart. With 1,000 Stacks on an hour, a check starts every 3.6 s, not a
// thousand at the top of the hour; and a Stack's checks stay an interval
// apart, whenever it was created or last applied.

// driftPhase is the offset, within interval, of key's checks: its rank among
// peers (all Stacks with this interval, key among them), ordered by a hash
// of their keys so that ranks do not follow names or creation order, times
// interval over their number.
func driftPhase(key string, peers []string, interval time.Duration) time.Duration {
	return phaseAmong(key, rankPeers(peers), interval)
}

// rankedKey is a Stack's key with the hash that orders it among its peers.
type rankedKey struct {
	key  string
	hash uint64
}

func (a rankedKey) less(b rankedKey) bool {
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return a.key < b.key
}

// rankPeers orders peers by hash, once for every Stack whose phase is then
// looked up among them (phaseAmong).
func rankPeers(peers []string) []rankedKey {
	all := make([]rankedKey, 0, len(peers))
	for _, p := range peers {
		all = append(all, rankedKey{p, keyHash(p)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].less(all[j]) })
	return all
}

// phaseAmong is driftPhase with the peers ranked: key's rank by binary
// search, or, when it is not among them, the rank it would have once added.
func phaseAmong(key string, ranked []rankedKey, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	me := rankedKey{key, keyHash(key)}
	i := sort.Search(len(ranked), func(i int) bool { return !ranked[i].less(me) })
	n := len(ranked)
	if i == n || ranked[i].key != key {
		n++ // not yet among them: it counts itself
	}
	return time.Duration(int64(interval) / int64(n) * int64(i))
}

func keyHash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()
}

// nextDriftCheck is the first time at the Stack's phase (counted from the
// Unix epoch, so that every controller replica agrees) that is at least half
// an interval after base, the end of the last check or apply: checks of one
// Stack are an interval apart, and the first after an apply comes between
// half an interval and one and a half after it.
func nextDriftCheck(base time.Time, phase, interval time.Duration) time.Time {
	if interval <= 0 {
		return base
	}
	earliest := base.Add(interval / 2)
	// The slot at or after earliest: phase + k*interval.
	since := earliest.Sub(time.Unix(0, 0).Add(phase))
	k := since / interval
	if since%interval != 0 && since > 0 {
		k++
	}
	return time.Unix(0, 0).Add(phase + k*interval)
}

// driftRankingTTL is how long a ranking of the Stacks that share a drift
// interval is reused. Ranking reads every cached Stack; doing it for each
// check or apply that reschedules one Stack made a fleet's reschedules
// quadratic (10,000 Stacks: 10,000 lists and sorts of 10,000). A ranking
// that is a little old only places the phase of a Stack created since as if
// the others had not changed; the next ranking evens them out again.
const driftRankingTTL = 30 * time.Second

// driftRankings keeps, per drift interval, the last ranking of its Stacks.
type driftRankings struct {
	mu         sync.Mutex
	byInterval map[time.Duration]driftRanking
	now        func() time.Time // time.Now when nil
}

type driftRanking struct {
	at     time.Time
	ranked []rankedKey
}

// among returns the ranking of interval's Stacks, from peers when the
// one kept is older than driftRankingTTL (or there is none); a failed
// listing (ok false) is used once and not kept.
func (d *driftRankings) among(interval time.Duration, peers func() (keys []string, ok bool)) []rankedKey {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	if r, found := d.byInterval[interval]; found && now().Sub(r.at) < driftRankingTTL {
		return r.ranked
	}
	keys, ok := peers()
	ranked := rankPeers(keys)
	if ok {
		if d.byInterval == nil {
			d.byInterval = map[time.Duration]driftRanking{}
		}
		d.byInterval[interval] = driftRanking{at: now(), ranked: ranked}
	}
	return ranked
}
