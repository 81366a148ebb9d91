package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

var sha1Rev = regexp.MustCompile(`sha1:([0-9a-f]{40})\b`)

// gitHubRequest sets a commit status on the event's commit:
// POST {address}/repos/{owner}/{repo}/statuses/{sha}, context
// "stackpilot/<ns>/<name>". Applied and recovered are success, failed and
// rolled-back failure (on the commit that failed), plan-pending pending.
func gitHubRequest(t Target, ev Event) (*Request, error) {
	var state string
	switch ev.Type {
	case v1alpha1.EventApplied, v1alpha1.EventRecovered:
		state = "success"
	case v1alpha1.EventFailed, v1alpha1.EventRolledBack:
		state = "failure"
	case v1alpha1.EventPlanPending:
		state = "pending"
	default:
		return nil, ErrSkip
	}
	m := sha1Rev.FindStringSubmatch(ev.Revision)
	if m == nil {
		return nil, ErrSkip // not a Git revision
	}
	owner, repo, ok := OwnerRepo(ev.GitURL)
	if !ok {
		return nil, ErrSkip
	}
	body, err := json.Marshal(map[string]string{
		"state":       state,
		"context":     ev.Key(),
		"description": cut(ev.Summary(), 140), // GitHub's limit
	})
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/vnd.github+json")
	h.Set("User-Agent", "stackpilot-controller")
	h.Set("Authorization", "Bearer "+t.Token)
	u := strings.TrimRight(t.Address, "/") + fmt.Sprintf("/repos/%s/%s/statuses/%s",
		url.PathEscape(owner), url.PathEscape(repo), m[1])
	return &Request{Method: http.MethodPost, URL: u, Header: h, Body: bytes.Clone(body)}, nil
}

// OwnerRepo reads owner and repository from a Git URL: the last two path
// segments, without ".git" (https://github.com/o/r.git, ssh://git@host/o/r,
// git@github.com:o/r.git).
func OwnerRepo(raw string) (owner, repo string, ok bool) {
	path := raw
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		path = u.Path
	} else if i := strings.Index(raw, ":"); i >= 0 {
		path = raw[i+1:] // scp-like git@host:owner/repo
	}
	parts := strings.Split(strings.Trim(strings.TrimSuffix(strings.Trim(path, "/"), ".git"), "/"), "/")
	if len(parts) < 2 || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return "", "", false
	}
	return parts[len(parts)-2], parts[len(parts)-1], true
}
