package notify

import "github.com/stackpilot/stackpilot/api/v1alpha1"

// pagerDutyPayload is an Events API v2 event: a failure or a rollback
// triggers the Stack's incident and a recovery resolves it; drift has its
// own incident (key with "/drift"), so a recovery does not resolve drift.
// Applies and pending plans are no incident.
func pagerDutyPayload(t Target, ev Event) (map[string]any, bool) {
	var action, key string
	switch ev.Type {
	case v1alpha1.EventFailed, v1alpha1.EventRolledBack:
		action, key = "trigger", ev.Key()
	case v1alpha1.EventRecovered:
		action, key = "resolve", ev.Key()
	case v1alpha1.EventDrifted:
		action, key = "trigger", ev.Key()+"/drift"
	case v1alpha1.EventDriftResolved:
		action, key = "resolve", ev.Key()+"/drift"
	default:
		return nil, false
	}
	p := map[string]any{"routing_key": t.Token, "event_action": action, "dedup_key": key}
	if action == "trigger" {
		details := map[string]any{"event": ev.Type, "revision": ev.Revision, "reason": ev.Reason}
		if ev.Message != "" {
			details["message"] = ev.Message
		}
		if c := ev.ChangeText(); c != "" {
			details["changes"] = c
		}
		if len(ev.Resources) > 0 {
			details["resources"] = ev.Resources
		}
		severity := "error"
		if ev.Severity == SeverityWarning {
			severity = "warning"
		}
		p["payload"] = map[string]any{
			"summary":        cut(ev.Summary(), 1024), // PagerDuty's limit
			"source":         ev.Namespace + "/" + ev.Name,
			"severity":       severity,
			"timestamp":      ev.Time.Format("2006-01-02T15:04:05Z"),
			"component":      ev.Name,
			"group":          ev.Namespace,
			"class":          string(ev.Type),
			"custom_details": details,
		}
	}
	return p, true
}
