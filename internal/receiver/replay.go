package receiver

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// ReplayWindow is how long a delivery is remembered.
const ReplayWindow = 10 * time.Minute

// maxRemembered bounds the replay cache; past it the oldest ids go first
// (a flood of distinct signed deliveries cannot grow memory without end).
const maxRemembered = 100_000

// replayKey names one delivery to a Receiver by the SHA-256 of its body: the
// part the signature covers. A sender's delivery header (X-GitHub-Delivery
// and the like) is not signed, so a captured request sent again with a new
// one would pass as new; the same body within ReplayWindow is a replay,
// whatever its headers. A sender's own redelivery sends the same body, and
// is one too. Senders put an id or a timestamp in each notification, so two
// real events do not share a body.
func replayKey(receiver string, body []byte) string {
	sum := sha256.Sum256(body)
	return receiver + "\x00" + hex.EncodeToString(sum[:])
}

// replayCache remembers delivery ids seen in the last ReplayWindow.
type replayCache struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	order []seenAt // insertion order, for pruning
	now   func() time.Time
}

type seenAt struct {
	id string
	at time.Time
}

func newReplayCache() *replayCache {
	return &replayCache{seen: map[string]time.Time{}, now: time.Now}
}

// seenBefore records id and reports whether it was seen within the window.
func (c *replayCache) seenBefore(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.prune(now)
	if at, ok := c.seen[id]; ok && now.Sub(at) < ReplayWindow {
		return true
	}
	c.seen[id] = now
	c.order = append(c.order, seenAt{id, now})
	return false
}

// forget drops id, so that a delivery we failed to act on can be retried.
func (c *replayCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, id)
}

func (c *replayCache) prune(now time.Time) {
	for len(c.order) > 0 {
		first := c.order[0]
		if now.Sub(first.at) < ReplayWindow && len(c.order) <= maxRemembered {
			return
		}
		// Only the entry this record made: a forgotten id seen again later
		// has a newer one.
		if c.seen[first.id].Equal(first.at) {
			delete(c.seen, first.id)
		}
		c.order = c.order[1:]
	}
}
