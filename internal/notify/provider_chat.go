package notify

import (
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// slackPayload is an incoming-webhook message: text for notifications and
// clients without blocks, blocks with the details.
func slackPayload(t Target, ev Event) map[string]any {
	blocks := []map[string]any{{
		"type": "section",
		"text": map[string]any{"type": "mrkdwn", "text": emoji(ev.Type) + " " + ev.Summary()},
	}}
	if d := details(ev); d != "" {
		blocks = append(blocks, map[string]any{
			"type": "section",
			"text": map[string]any{"type": "mrkdwn", "text": d},
		})
	}
	p := map[string]any{"username": "stackpilot", "text": ev.Summary(), "blocks": blocks}
	if t.Channel != "" {
		p["channel"] = t.Channel
	}
	return p
}

// teamsPayload is an Office 365 connector MessageCard.
func teamsPayload(ev Event) map[string]any {
	facts := []map[string]string{
		{"name": "Stack", "value": ev.Namespace + "/" + ev.Name},
		{"name": "Event", "value": string(ev.Type)},
	}
	add := func(name, value string) {
		if value != "" {
			facts = append(facts, map[string]string{"name": name, "value": value})
		}
	}
	add("Revision", ev.Revision)
	add("Reason", ev.Reason)
	add("Changes", ev.ChangeText())
	add("Resources", strings.Join(ev.Resources, "\n\n"))
	section := map[string]any{"activityTitle": ev.Summary(), "facts": facts}
	if ev.Message != "" {
		section["text"] = ev.Message
	}
	return map[string]any{
		"@type":      "MessageCard",
		"@context":   "https://schema.org/extensions",
		"summary":    ev.Summary(),
		"themeColor": color(ev.Severity),
		"title":      "Stack " + ev.Namespace + "/" + ev.Name + " " + string(ev.Type),
		"sections":   []any{section},
	}
}

func details(ev Event) string {
	var lines []string
	if ev.Reason != "" {
		lines = append(lines, "*Reason:* "+ev.Reason)
	}
	if len(ev.Resources) > 0 {
		lines = append(lines, "*Resources:*")
		for _, r := range ev.Resources {
			lines = append(lines, "• `"+r+"`")
		}
	}
	return strings.Join(lines, "\n")
}

func emoji(t v1alpha1.AlertEventType) string {
	switch t {
	case v1alpha1.EventFailed, v1alpha1.EventRolledBack:
		return ":x:"
	case v1alpha1.EventDrifted, v1alpha1.EventPlanPending, v1alpha1.EventPolicyViolation:
		return ":warning:"
	}
	return ":white_check_mark:"
}

func color(severity string) string {
	switch severity {
	case SeverityError:
		return "D32F2F"
	case SeverityWarning:
		return "F9A825"
	}
	return "2E7D32"
}
