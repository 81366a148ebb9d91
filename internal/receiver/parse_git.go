package receiver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// InvalidEventError is a body that is not the event its headers announce.
type InvalidEventError struct{ Reason string }

func (e *InvalidEventError) Error() string { return "invalid event: " + e.Reason }

func invalid(format string, args ...any) error {
	return &InvalidEventError{Reason: fmt.Sprintf(format, args...)}
}

// parser reads one sender type's event.
type parser func(h http.Header, body []byte) (Event, error)

var parsers = map[string]parser{
	"github":       parseGitHub,
	"gitea":        parseGitea,
	"gitlab":       parseGitLab,
	"bitbucket":    parseBitbucket,
	"generic":      parseGeneric,
	"generic-hmac": parseGeneric,
	"oci":          parseOCI,
}

// Parse reads the event of a Receiver of type typ.
func Parse(typ string, h http.Header, body []byte) (Event, error) {
	p, ok := parsers[typ]
	if !ok {
		return Event{}, invalid("unknown receiver type %q", typ)
	}
	ev, err := p(h, body)
	if err != nil {
		return Event{}, err
	}
	ev.bound()
	return ev, nil
}

// githubPush is the part of a GitHub or Gitea push event we read.
type githubPush struct {
	Ref        string `json:"ref"`
	Repository struct {
		CloneURL      string `json:"clone_url"`
		SSHURL        string `json:"ssh_url"`
		HTMLURL       string `json:"html_url"`
		GitURL        string `json:"git_url"`
		DefaultBranch string `json:"default_branch"`
	} `json:"repository"`
}

func parseGitHub(h http.Header, body []byte) (Event, error) {
	return parseGitHubLike(h.Get("X-GitHub-Event"), body)
}

func parseGitea(h http.Header, body []byte) (Event, error) {
	name := h.Get("X-Gitea-Event")
	if name == "" {
		name = h.Get("X-Gogs-Event")
	}
	return parseGitHubLike(name, body)
}

func parseGitHubLike(name string, body []byte) (Event, error) {
	ev := Event{Name: name}
	if name == "ping" {
		ev.Ping = true
		return ev, nil
	}
	if name == "" {
		return ev, invalid("no event header (X-GitHub-Event or X-Gitea-Event)")
	}
	if isPullEvent(name) {
		return parseGitHubPull(ev, body)
	}
	if name != "push" && name != "create" && name != "release" {
		return ev, nil // filtered by name; nothing to read
	}
	var p githubPush
	if err := json.Unmarshal(body, &p); err != nil {
		return ev, invalid("the body is not a JSON push event: %v", err)
	}
	r := p.Repository
	ev.Repositories = []string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL}
	ev.DefaultBranch = r.DefaultBranch
	if p.Ref != "" {
		ev.Refs = []string{qualify(p.Ref)}
	}
	return ev, requireRepository(ev)
}

// gitlabPush is the part of a GitLab push or tag push event we read.
type gitlabPush struct {
	Ref     string `json:"ref"`
	Project struct {
		GitHTTPURL    string `json:"git_http_url"`
		GitSSHURL     string `json:"git_ssh_url"`
		WebURL        string `json:"web_url"`
		DefaultBranch string `json:"default_branch"`
	} `json:"project"`
	Repository struct {
		GitHTTPURL string `json:"git_http_url"`
		GitSSHURL  string `json:"git_ssh_url"`
		Homepage   string `json:"homepage"`
	} `json:"repository"`
}

func parseGitLab(h http.Header, body []byte) (Event, error) {
	ev := Event{Name: h.Get("X-Gitlab-Event")}
	if ev.Name == "" {
		return ev, invalid("no X-Gitlab-Event header")
	}
	if ev.Name == "Merge Request Hook" {
		return parseGitLabMerge(ev, body)
	}
	if ev.Name != "Push Hook" && ev.Name != "Tag Push Hook" {
		return ev, nil
	}
	var p gitlabPush
	if err := json.Unmarshal(body, &p); err != nil {
		return ev, invalid("the body is not a JSON GitLab push event: %v", err)
	}
	ev.Repositories = []string{p.Project.GitHTTPURL, p.Project.GitSSHURL, p.Project.WebURL,
		p.Repository.GitHTTPURL, p.Repository.GitSSHURL, p.Repository.Homepage}
	ev.DefaultBranch = p.Project.DefaultBranch
	if p.Ref != "" {
		ev.Refs = []string{qualify(p.Ref)}
	}
	return ev, requireRepository(ev)
}

// bitbucketPush reads both Bitbucket Server/Data Center "repo:refs_changed"
// and Bitbucket Cloud "repo:push".
type bitbucketPush struct {
	// Server
	Changes []struct {
		Ref struct {
			ID string `json:"id"`
		} `json:"ref"`
		RefID string `json:"refId"`
	} `json:"changes"`
	// Cloud
	Push struct {
		Changes []struct {
			New *struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"new"`
		} `json:"changes"`
	} `json:"push"`
	Repository struct {
		Links struct {
			Clone json.RawMessage `json:"clone"`
			HTML  json.RawMessage `json:"html"`
			Self  json.RawMessage `json:"self"`
		} `json:"links"`
	} `json:"repository"`
}

type bitbucketLink struct {
	Href string `json:"href"`
}

// links reads a Bitbucket link field: Server gives a list, Cloud one object.
func links(raw json.RawMessage) []string {
	var list []bitbucketLink
	if json.Unmarshal(raw, &list) != nil {
		var one bitbucketLink
		if json.Unmarshal(raw, &one) != nil {
			return nil
		}
		list = []bitbucketLink{one}
	}
	var out []string
	for _, l := range list {
		out = append(out, l.Href)
	}
	return out
}

func parseBitbucket(h http.Header, body []byte) (Event, error) {
	ev := Event{Name: h.Get("X-Event-Key")}
	if ev.Name == "diagnostics:ping" {
		ev.Ping = true
		return ev, nil
	}
	if ev.Name == "" {
		return ev, invalid("no X-Event-Key header")
	}
	if strings.HasPrefix(ev.Name, "pullrequest:") {
		switch ev.Name {
		case "pullrequest:created", "pullrequest:updated", "pullrequest:fulfilled", "pullrequest:rejected":
			return parseBitbucketPull(ev, body)
		}
		return ev, nil
	}
	if ev.Name != "repo:refs_changed" && ev.Name != "repo:push" {
		return ev, nil
	}
	var p bitbucketPush
	if err := json.Unmarshal(body, &p); err != nil {
		return ev, invalid("the body is not a JSON Bitbucket push event: %v", err)
	}
	for _, c := range p.Changes {
		id := c.Ref.ID
		if id == "" {
			id = c.RefID
		}
		if id != "" {
			ev.Refs = append(ev.Refs, qualify(id))
		}
	}
	for _, c := range p.Push.Changes {
		if c.New == nil || c.New.Name == "" {
			continue
		}
		if c.New.Type == "tag" {
			ev.Refs = append(ev.Refs, "refs/tags/"+c.New.Name)
		} else {
			ev.Refs = append(ev.Refs, "refs/heads/"+c.New.Name)
		}
	}
	l := p.Repository.Links
	ev.Repositories = append(append(links(l.Clone), links(l.HTML)...), links(l.Self)...)
	return ev, requireRepository(ev)
}

// genericEvent is the optional body of a generic or generic-hmac event.
type genericEvent struct {
	Event      string `json:"event"`
	Repository string `json:"repository"`
	Ref        string `json:"ref"`
	Tag        string `json:"tag"`
}

// parseGeneric reads {"event", "repository", "ref", "tag"}, all optional;
// an empty body asks every selected Stack to reconcile.
func parseGeneric(h http.Header, body []byte) (Event, error) {
	ev := Event{Name: h.Get("X-Event")}
	if len(strings.TrimSpace(string(body))) == 0 {
		return ev, nil
	}
	var g genericEvent
	if err := json.Unmarshal(body, &g); err != nil {
		return ev, invalid("the body is not empty and not a JSON object {event, repository, ref, tag}: %v", err)
	}
	if ev.Name == "" {
		ev.Name = g.Event
	}
	if g.Repository != "" {
		ev.Repositories = []string{g.Repository}
	}
	if g.Ref != "" {
		ev.Refs = []string{qualify(g.Ref)}
	}
	if g.Tag != "" {
		ev.Refs = append(ev.Refs, "refs/tags/"+g.Tag)
	}
	return ev, nil
}

// qualify turns a short branch name into refs/heads/x; full names stay.
func qualify(ref string) string {
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return "refs/heads/" + ref
}

func requireRepository(ev Event) error {
	for _, r := range ev.Repositories {
		if r != "" {
			return nil
		}
	}
	return invalid("the %s event names no repository", ev.Name)
}
