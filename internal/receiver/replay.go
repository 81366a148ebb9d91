package receiver

import (
	"net/http"
	"sync"
	"time"
)

// ReplayWindow is how long a delivery id is remembered.
const ReplayWindow = 10 * time.Minute

// maxRemembered bounds the replay cache; past it the oldest ids go first
// (a flood of distinct signed deliveries cannot grow memory without end).
const maxRemembered = 100_000

// deliveryHeaders carry a sender's unique id of one delivery; a redelivery
// from the sender's UI reuses it, which is what a replay looks like.
var deliveryHeaders = []string{
	"X-GitHub-Delivery", "X-Gitlab-Event-UUID", "X-Gitea-Delivery", "X-Gogs-Delivery",
	"X-Request-UUID", "X-Hook-UUID", "X-Delivery-ID",
}

// DeliveryID returns the request's delivery id, or "" when it has none.
func DeliveryID(h http.Header) string {
	for _, name := range deliveryHeaders {
		if v := h.Get(name); v != "" {
			if len(v) > 200 {
				v = v[:200]
			}
			return name + ":" + v
		}
	}
	return ""
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
