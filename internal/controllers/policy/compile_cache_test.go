package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/policy"
)

// A policy's content is compiled once; a verdict follows the content, not
// the name a cached entry was made for, and the cache stays bounded.
func TestVerdictCache(t *testing.T) {
	c := &verdictCache{verdicts: map[string]string{}}
	good := policy.Policy{Kind: KindStackPolicy, Namespace: "ns", Name: "p",
		Rules: []policy.Rule{{Name: "r", Expression: "resource.type != 'x'"}}}
	broken := good
	broken.Rules = []policy.Rule{{Name: "r", Expression: "resource.nme != 'x'"}}

	if v := c.check(good); v != "" {
		t.Fatalf("a policy that compiles: %q", v)
	}
	if v := c.check(broken); !strings.Contains(v, "rule r: expression") || !strings.Contains(v, "nme") {
		t.Fatalf("a broken rule: %q, want its rule, field and the unknown field", v)
	}
	if len(c.verdicts) != 2 {
		t.Fatalf("%d verdicts, want one per content", len(c.verdicts))
	}
	// The cached verdict is read, not compiled again: a verdict planted for
	// the good content comes back as is.
	for k := range c.verdicts {
		if c.verdicts[k] == "" {
			c.verdicts[k] = "planted"
		}
	}
	if v := c.check(good); v != "planted" {
		t.Fatalf("second check of the same content compiled again (%q)", v)
	}
	// Any change to a rule is a new entry.
	fixed := broken
	fixed.Rules = []policy.Rule{{Name: "r", Expression: "resource.name != 'x'"}}
	if v := c.check(fixed); v != "" {
		t.Fatalf("the fixed policy: %q", v)
	}
	// Bounded: at the limit it starts over.
	for i := 0; len(c.verdicts) < compileCacheSize; i++ {
		p := good
		p.Name = fmt.Sprintf("p%d", i)
		c.check(p)
	}
	c.check(policy.Policy{Kind: KindStackPolicy, Namespace: "ns", Name: "one-more", Rules: good.Rules})
	if n := len(c.verdicts); n != 1 {
		t.Fatalf("%d verdicts after the cache filled, want it started over with 1", n)
	}
}
