package notify

import (
	"sort"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Redacted stands in a message for a secret value.
const Redacted = "[redacted]"

// secretRefs names the Secrets a Stack reads: their values must never be
// in a message, whatever a program or a tool put into an error.
func secretRefs(stack *v1alpha1.Stack) []string {
	var names []string
	add := func(n string) {
		if n != "" {
			names = append(names, n)
		}
	}
	for _, c := range stack.Spec.ConfigFrom {
		if c.SecretRef != nil {
			add(c.SecretRef.Name)
		}
	}
	for _, e := range stack.Spec.EnvFrom {
		if e.SecretRef != nil {
			add(e.SecretRef.Name)
		}
	}
	if r := stack.Spec.BackendSecretRef; r != nil {
		add(r.Name)
	}
	if sp := stack.Spec.SecretsProvider; sp != nil && sp.PassphraseSecretRef != nil {
		add(sp.PassphraseSecretRef.Name)
	}
	if g := stack.Spec.Source.Git; g != nil && g.SecretRef != nil {
		add(g.SecretRef.Name)
	}
	if o := stack.Spec.Source.OCI; o != nil {
		if o.SecretRef != nil {
			add(o.SecretRef.Name)
		}
		if o.Verify != nil {
			add(o.Verify.SecretRef.Name)
		}
	}
	return names
}

// MinSecretLen: shorter values would mangle ordinary text ("a", "no")
// without protecting anything.
const MinSecretLen = 3

// Scrubber replaces secret values in text.
type Scrubber struct{ values []string }

// NewScrubber scrubs these values (and each line of a multi-line value, as
// an error may quote one line of a key file), longest first so that a value
// that contains another is replaced whole.
func NewScrubber(values []string) *Scrubber {
	seen := map[string]bool{}
	var vs []string
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			vs = append(vs, v)
		}
	}
	for _, v := range values {
		add(v)
		if strings.Contains(v, "\n") {
			for _, l := range strings.Split(v, "\n") {
				add(l)
			}
		}
	}
	sort.SliceStable(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	return &Scrubber{values: vs}
}

// String scrubs s.
func (s *Scrubber) String(in string) string {
	for _, v := range s.values {
		in = strings.ReplaceAll(in, v, Redacted)
	}
	return in
}

// Event scrubs every text the event's payload carries.
func (s *Scrubber) Event(e Event) Event {
	e.Revision = s.String(e.Revision)
	e.Reason = s.String(e.Reason)
	e.Message = s.String(e.Message)
	rs := make([]string, len(e.Resources))
	for i, r := range e.Resources {
		rs[i] = s.String(r)
	}
	e.Resources = rs
	return e
}
