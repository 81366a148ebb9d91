package policy

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/stackpilot/stackpilot/internal/policy"
)

// compileCacheSize bounds the verdicts kept: one per distinct policy
// content. A fleet has few policies; when more distinct contents than this
// are seen (policies edited many times), the cache starts over.
const compileCacheSize = 1024

// compiled remembers whether a policy's content compiles, so that For,
// which runs before every up, preview and destroy of a policy-selected
// Stack, compiles a policy once per content rather than once per Stack and
// operation. Keyed by the digest of the policy as For hands it to the
// runner (kind, name and rules): any change to a rule is a new key. The
// runner still compiles in its own process; this only decides whether a
// Stack's operation may start.
var compiled = &verdictCache{verdicts: map[string]string{}}

type verdictCache struct {
	mu       sync.Mutex
	verdicts map[string]string // digest → "" (compiles) or Invalid(err)
}

// check is "" when p compiles, else what is wrong with it (Invalid's text).
func (c *verdictCache) check(p policy.Policy) string {
	data, err := json.Marshal(p)
	if err != nil { // plain data: cannot fail
		panic(fmt.Sprintf("policy digest: %v", err))
	}
	key := digestOf(data)
	c.mu.Lock()
	verdict, ok := c.verdicts[key]
	c.mu.Unlock()
	if ok {
		return verdict
	}
	if _, err := policy.Compile(p); err != nil {
		verdict = Invalid(err)
	}
	c.mu.Lock()
	if len(c.verdicts) >= compileCacheSize {
		c.verdicts = map[string]string{}
	}
	c.verdicts[key] = verdict
	c.mu.Unlock()
	return verdict
}
