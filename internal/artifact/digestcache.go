package artifact

import (
	"context"
	"strings"
	"sync"
)

// maxDigestCacheArtifacts bounds the digest cache: the paths of this many
// artifacts are remembered, the oldest forgotten first. Stacks look at the
// newest commit of their branch, so a few per repository are enough.
const maxDigestCacheArtifacts = 256

// digestCache remembers the digest of each (artifact, path), computing each
// once even when many goroutines ask at the same time. Stored trees never
// change, so an entry never goes stale; a failure is not remembered (it may
// be a cancelled context).
type digestCache struct {
	mu        sync.Mutex
	entries   map[string]*digestEntry // artifact digest NUL path -> entry
	artifacts []string                // artifact digests, oldest first
	computed  int                     // digests computed, for tests
}

type digestEntry struct {
	done   chan struct{}
	digest string
	err    error
}

func (c *digestCache) get(ctx context.Context, key string, compute func() (string, error)) (string, error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*digestEntry{}
	}
	if e, ok := c.entries[key]; ok {
		c.mu.Unlock()
		select {
		case <-e.done:
			return e.digest, e.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	e := &digestEntry{done: make(chan struct{})}
	c.entries[key] = e
	c.remember(key)
	c.computed++
	c.mu.Unlock()

	e.digest, e.err = compute()
	if e.err != nil {
		c.mu.Lock()
		if c.entries[key] == e {
			delete(c.entries, key)
		}
		c.mu.Unlock()
	}
	close(e.done)
	return e.digest, e.err
}

// remember records key's artifact, forgetting the oldest artifact's entries
// past the bound. c.mu is held.
func (c *digestCache) remember(key string) {
	art, _, _ := strings.Cut(key, "\x00")
	for _, a := range c.artifacts {
		if a == art {
			return
		}
	}
	c.artifacts = append(c.artifacts, art)
	if len(c.artifacts) <= maxDigestCacheArtifacts {
		return
	}
	oldest := c.artifacts[0]
	c.artifacts = c.artifacts[1:]
	for k := range c.entries {
		if strings.HasPrefix(k, oldest+"\x00") {
			delete(c.entries, k)
		}
	}
}
