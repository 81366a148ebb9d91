package stack

import (
	"hash/fnv"
	"sort"
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
	if interval <= 0 {
		return 0
	}
	type ranked struct {
		key  string
		hash uint64
	}
	all := make([]ranked, 0, len(peers)+1)
	seen := false
	for _, p := range peers {
		seen = seen || p == key
		all = append(all, ranked{p, keyHash(p)})
	}
	if !seen {
		all = append(all, ranked{key, keyHash(key)})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].hash != all[j].hash {
			return all[i].hash < all[j].hash
		}
		return all[i].key < all[j].key
	})
	for i, r := range all {
		if r.key == key {
			return time.Duration(int64(interval) / int64(len(all)) * int64(i))
		}
	}
	return 0
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
