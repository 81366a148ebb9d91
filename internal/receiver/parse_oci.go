package receiver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// distributionEnvelope is a CNCF Distribution (Docker registry, Zot,
// GitLab/GitHub-compatible) notification.
type distributionEnvelope struct {
	Events []struct {
		Action string `json:"action"`
		Target struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
			URL        string `json:"url"`
		} `json:"target"`
		Request struct {
			Host string `json:"host"`
		} `json:"request"`
	} `json:"events"`
}

// dockerHubPush is a Docker Hub webhook.
type dockerHubPush struct {
	PushData *struct {
		Tag string `json:"tag"`
	} `json:"push_data"`
	Repository struct {
		RepoName string `json:"repo_name"`
	} `json:"repository"`
}

// harborEvent is a Harbor webhook (payload format "Default").
type harborEvent struct {
	Type      string `json:"type"`
	EventData *struct {
		Repository struct {
			RepoFullName string `json:"repo_full_name"`
		} `json:"repository"`
		Resources []struct {
			Tag         string `json:"tag"`
			ResourceURL string `json:"resource_url"`
		} `json:"resources"`
	} `json:"event_data"`
}

// parseOCI reads a registry's push notification in any of the three
// formats; the event name is "push" for each (the filter names that).
func parseOCI(_ http.Header, body []byte) (Event, error) {
	ev := Event{Name: "push", OCI: true}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return ev, invalid("the body is not a JSON registry notification: %v", err)
	}
	switch {
	case probe["events"] != nil:
		var d distributionEnvelope
		if err := json.Unmarshal(body, &d); err != nil {
			return ev, invalid("the body is not a Distribution notification envelope: %v", err)
		}
		pushed := false
		for _, e := range d.Events {
			if e.Action != "push" {
				continue
			}
			pushed = true
			host := e.Request.Host
			if host == "" {
				if u, err := url.Parse(e.Target.URL); err == nil {
					host = u.Host
				}
			}
			if host != "" && e.Target.Repository != "" {
				ev.Repositories = append(ev.Repositories, host+"/"+e.Target.Repository)
			}
			if e.Target.Tag != "" {
				ev.Tags = append(ev.Tags, e.Target.Tag)
			}
		}
		if !pushed {
			ev.Name = "pull" // nothing but pulls (or deletes): filtered
			return ev, nil
		}
	case probe["push_data"] != nil:
		var d dockerHubPush
		if err := json.Unmarshal(body, &d); err != nil || d.PushData == nil {
			return ev, invalid("the body is not a Docker Hub webhook")
		}
		if d.Repository.RepoName != "" {
			ev.Repositories = []string{"docker.io/" + d.Repository.RepoName}
		}
		if d.PushData.Tag != "" {
			ev.Tags = []string{d.PushData.Tag}
		}
	case probe["event_data"] != nil:
		var d harborEvent
		if err := json.Unmarshal(body, &d); err != nil || d.EventData == nil {
			return ev, invalid("the body is not a Harbor webhook")
		}
		if d.Type != "PUSH_ARTIFACT" {
			ev.Name = d.Type
			return ev, nil
		}
		for _, r := range d.EventData.Resources {
			if r.Tag != "" {
				ev.Tags = append(ev.Tags, r.Tag)
			}
			// resource_url is host/project/repo:tag (or @digest).
			if repo := stripReference(r.ResourceURL); strings.Contains(repo, "/") {
				ev.Repositories = append(ev.Repositories, repo)
			}
		}
	default:
		return ev, invalid("the body is none of: a Distribution envelope {events}, a Docker Hub {push_data} or a Harbor {event_data} webhook")
	}
	if len(ev.Repositories) == 0 {
		return ev, invalid("the registry push names no repository")
	}
	return ev, nil
}

// stripReference drops ":tag" or "@digest" from host/path:tag.
func stripReference(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// NormalizeOCIRepository reduces an OCI repository ("oci://host/path",
// "host/path", "host/path:tag") to lower-case "host/path", with Docker
// Hub's host aliases as docker.io and its official images under library/.
func NormalizeOCIRepository(raw string) string {
	s := strings.TrimSpace(raw)
	s = strings.TrimPrefix(s, "oci://")
	s = strings.TrimPrefix(s, "https://")
	s = strings.TrimPrefix(s, "http://")
	s = strings.Trim(stripReference(s), "/")
	host, path, ok := strings.Cut(s, "/")
	if !ok || host == "" || path == "" {
		return ""
	}
	host = strings.ToLower(host)
	switch host {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		host = "docker.io"
	}
	if host == "docker.io" && !strings.Contains(path, "/") {
		path = "library/" + path
	}
	return host + "/" + strings.ToLower(path)
}
