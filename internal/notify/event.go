package notify

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Bounds of a message: it is read by people in a chat, not a log.
const (
	// MaxResources is how many changed resources a message names.
	MaxResources = 5
	// MaxMessage bounds the error's first line (bytes).
	MaxMessage = 512
)

// Event is one message about one Stack: every provider builds its payload
// from it. Its text comes from the Stack's status, which holds no secret
// value; it is scrubbed again before it is sent (scrub.go).
type Event struct {
	Type      v1alpha1.AlertEventType `json:"event"`
	Namespace string                  `json:"namespace"`
	Name      string                  `json:"name"`
	Revision  string                  `json:"revision,omitempty"`
	Severity  string                  `json:"severity"`
	Reason    string                  `json:"reason,omitempty"`
	Message   string                  `json:"message,omitempty"`
	Changes   *v1alpha1.ChangeSummary `json:"changes,omitempty"`
	Resources []string                `json:"resources,omitempty"`
	Total     int64                   `json:"totalResources,omitempty"`
	Time      time.Time               `json:"time"`
	// GitURL is the Stack's Git repository (for the github provider); not sent.
	GitURL string `json:"-"`
	// SecretRefs name the Stack's Secrets, whose values are scrubbed; not sent.
	SecretRefs []string `json:"-"`
}

// Severities.
const (
	SeverityInfo    = "info"
	SeverityWarning = "warning"
	SeverityError   = "error"
)

// NewEvent describes the change t of the Stack as it is now.
func NewEvent(stack *v1alpha1.Stack, t v1alpha1.AlertEventType, now time.Time) Event {
	st := &stack.Status
	ev := Event{Type: t, Namespace: stack.Namespace, Name: stack.Name, Severity: SeverityInfo, Time: now.UTC()}
	if g := stack.Spec.Source.Git; g != nil {
		ev.GitURL = g.URL
	}
	if ready := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ReadyCondition); ready != nil {
		ev.Reason = ready.Reason
		if t == v1alpha1.EventFailed || t == v1alpha1.EventRolledBack {
			ev.Message = FirstLine(ready.Message, MaxMessage)
		}
	}
	newest := newestRecord(st.History)
	switch t {
	case v1alpha1.EventApplied, v1alpha1.EventRecovered:
		ev.Revision = st.LastAppliedRevision
		if r := newestRecord(st.History, v1alpha1.OutcomeSucceeded, v1alpha1.OutcomeSkipped); r != nil {
			ev.Changes, ev.Resources = r.Changes, firstN(r.Resources)
		}
	case v1alpha1.EventFailed:
		ev.Severity = SeverityError
		ev.Revision = st.LastAttemptedRevision
		if newest != nil {
			ev.Changes, ev.Resources = newest.Changes, firstN(newest.Resources)
			if ev.Message == "" {
				ev.Message = FirstLine(newest.Message, MaxMessage)
			}
		}
	case v1alpha1.EventRolledBack:
		ev.Severity = SeverityError
		if rb := st.Rollback; rb != nil {
			ev.Revision = rb.FailedRevision
			if ev.Message == "" {
				ev.Message = fmt.Sprintf("rollback to %s %s", rb.RestoredRevision, rb.Outcome)
			}
		}
	case v1alpha1.EventDrifted:
		ev.Severity = SeverityWarning
		if d := st.Drift; d != nil {
			ev.Revision, ev.Total = d.Revision, d.Total
			for i, r := range d.Resources {
				if i == MaxResources {
					break
				}
				ev.Resources = append(ev.Resources, r.Op+" "+r.URN)
			}
		}
		if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.DriftedCondition); c != nil {
			ev.Reason, ev.Message = c.Reason, FirstLine(c.Message, MaxMessage)
		}
	case v1alpha1.EventDriftResolved:
		ev.Revision = st.LastAppliedRevision
		if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.DriftedCondition); c != nil {
			ev.Reason = c.Reason
		}
	case v1alpha1.EventPolicyViolation:
		ev.Severity = SeverityWarning
		if p := st.Policy; p != nil {
			mandatory := 0
			for i, v := range p.Violations {
				if v.Enforcement == v1alpha1.EnforcementMandatory {
					mandatory++
				}
				if i < MaxResources {
					ev.Resources = append(ev.Resources, v.Enforcement+" "+v.Policy+" "+v.URN)
				}
			}
			if mandatory > 0 {
				ev.Severity = SeverityError
			}
			ev.Total = int64(len(p.Violations)) + int64(p.More)
			if len(p.Violations) > 0 {
				first := p.Violations[0]
				ev.Message = FirstLine(fmt.Sprintf("%s %s: %s", first.Policy, first.URN, first.Message), MaxMessage)
			}
			ev.Revision = st.LastAttemptedRevision
		}
		if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.PolicyCompliantCondition); c != nil {
			ev.Reason = c.Reason
		}
	case v1alpha1.EventPlanPending:
		ev.Severity = SeverityWarning
		if p := st.PendingPlan; p != nil {
			ev.Revision, ev.Total = p.Revision, p.Total
			ev.Changes = p.Changes.DeepCopy()
			ev.Message = "plan " + p.ID + " waits for approval"
			for i, r := range p.Resources {
				if i == MaxResources {
					break
				}
				ev.Resources = append(ev.Resources, r.Op+" "+r.URN)
			}
		}
		if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.PlanPendingCondition); c != nil {
			ev.Reason = c.Reason
		}
	}
	ev.SecretRefs = secretRefs(stack)
	return ev
}

// Summary is the one-line text of the event.
func (e Event) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Stack %s/%s %s", e.Namespace, e.Name, e.Type)
	if e.Revision != "" {
		fmt.Fprintf(&b, " at %s", e.Revision)
	}
	if c := e.ChangeText(); c != "" {
		fmt.Fprintf(&b, " (%s)", c)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// ChangeText counts the changes, "2 created, 1 updated", or "".
func (e Event) ChangeText() string {
	c := e.Changes
	if c == nil {
		return ""
	}
	var parts []string
	for _, p := range []struct {
		n    int64
		verb string
	}{{c.Create, "created"}, {c.Update, "updated"}, {c.Replace, "replaced"}, {c.Delete, "deleted"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.verb))
		}
	}
	return strings.Join(parts, ", ")
}

// Key is the stable identity of the Stack in other systems: PagerDuty's
// dedup key, GitHub's status context.
func (e Event) Key() string { return "stackpilot/" + e.Namespace + "/" + e.Name }

// FirstLine is the first non-empty line of s, cut to n bytes.
func FirstLine(s string, n int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return cut(l, n)
		}
	}
	return ""
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1] // never half a character
	}
	return s + "…"
}

func firstN(rs []string) []string {
	if len(rs) > MaxResources {
		rs = rs[:MaxResources]
	}
	return append([]string(nil), rs...)
}

// newestRecord is the newest operation in history (newest first) that
// ended with one of outcomes (any but running, without outcomes).
func newestRecord(h []v1alpha1.OperationRecord, outcomes ...v1alpha1.OperationOutcome) *v1alpha1.OperationRecord {
	for i := range h {
		r := &h[i]
		if r.Outcome == v1alpha1.OutcomeRunning {
			continue
		}
		if len(outcomes) == 0 {
			return r
		}
		for _, o := range outcomes {
			if r.Outcome == o && (r.Type == v1alpha1.OperationUp || r.Type == v1alpha1.OperationRollback || r.Type == v1alpha1.OperationRemediate) {
				return r
			}
		}
	}
	return nil
}
