// Package forge talks to the REST APIs of the forges that host pull
// requests (GitHub, GitLab, Gitea, Bitbucket Cloud): which files a pull request changes, the
// one comment a Stack keeps on it, the commit status of its head, and the
// open pull requests of a branch, for previews (spec.previews). Standard
// library only; every request carries the token in the forge's own header
// and no error ever repeats it.
package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// State is a commit status's state, in Stackpilot's words; each client maps
// it to its forge's.
type State string

const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
	// StateCancelled ends the status of a preview that a newer push or the
	// pull request's closing cancelled (GitHub and Gitea say "error",
	// GitLab "canceled").
	StateCancelled State = "cancelled"
)

// Status is a commit status (GitHub, Gitea), pipeline status (GitLab) or
// build status (Bitbucket) on a pull request's head commit.
type Status struct {
	State State
	// Context tells this Stack's status apart from others' on the same
	// commit: "stackpilot/<namespace>/<name>".
	Context string
	// Description is one line; clients cut it to what the forge admits.
	Description string
	// TargetURL links to the full plan, when there is one.
	TargetURL string
}

// PullRequest is an open pull request, as the poller lists it.
type PullRequest struct {
	Number int64
	Head   string
	Ref    string
	Base   string
	Fork   bool
	Labels []string
	URL    string
}

// Client is one repository on one forge, with one token.
type Client interface {
	// ChangedFiles lists the paths a pull request adds, changes, removes
	// or renames (both names of a rename), against its merge base. complete
	// is false when the forge stopped listing (GitHub lists at most 3,000
	// files): the caller then assumes every path changed.
	ChangedFiles(ctx context.Context, number int64) (files []string, complete bool, err error)
	// UpsertComment edits the comment id when it still exists, else the
	// comment of the pull request whose body holds marker, else creates
	// one; it returns the comment's id.
	UpsertComment(ctx context.Context, number int64, id, marker, body string) (string, error)
	// SetStatus sets the status of commit sha.
	SetStatus(ctx context.Context, sha string, s Status) error
	// OpenPullRequests lists the open pull requests into branch base.
	OpenPullRequests(ctx context.Context, base string) ([]PullRequest, error)
	// MaxCommentSize is the longest comment body the forge accepts, in
	// characters.
	MaxCommentSize() int
}

// Config says which forge, where, and with what token.
type Config struct {
	Provider string // github, gitlab, gitea, bitbucket (Cloud)
	// APIURL is the REST API's base URL; "" is the provider's default for
	// the repository's host.
	APIURL string
	// Repository is "owner/name" (GitLab: the project's full path).
	Repository string
	Token      string
	// HTTPClient, when set, replaces the default client (tests, proxies).
	HTTPClient *http.Client
}

// ConfigError is a spec.previews the controller cannot use as it is.
type ConfigError struct{ Reason string }

func (e *ConfigError) Error() string { return e.Reason }

// New returns the Client of cfg.
func New(cfg Config) (Client, error) {
	if cfg.Repository == "" || strings.Count(cfg.Repository, "/") < 1 {
		return nil, &ConfigError{Reason: fmt.Sprintf("spec.previews.repository %q: want owner/name", cfg.Repository)}
	}
	if cfg.Token == "" {
		return nil, &ConfigError{Reason: "the Secret of spec.previews.secretRef has no token"}
	}
	if cfg.APIURL == "" {
		return nil, &ConfigError{Reason: "spec.previews.apiURL is unset and has no default for this host: set it"}
	}
	base, err := url.Parse(strings.TrimSuffix(cfg.APIURL, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, &ConfigError{Reason: fmt.Sprintf("spec.previews.apiURL %q: want an http(s) URL", cfg.APIURL)}
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	api := &api{base: base, http: hc}
	switch cfg.Provider {
	case "github":
		api.auth = func(h http.Header) { h.Set("Authorization", "Bearer "+cfg.Token) }
		return &gitHub{api: api, repo: cfg.Repository}, nil
	case "gitea":
		api.auth = func(h http.Header) { h.Set("Authorization", "token "+cfg.Token) }
		return &gitea{api: api, repo: cfg.Repository}, nil
	case "gitlab":
		api.auth = func(h http.Header) { h.Set("PRIVATE-TOKEN", cfg.Token) }
		return &gitLab{api: api, project: url.PathEscape(cfg.Repository)}, nil
	case "bitbucket":
		// A repository or workspace access token.
		api.auth = func(h http.Header) { h.Set("Authorization", "Bearer "+cfg.Token) }
		return &bitbucket{api: api, repo: cfg.Repository}, nil
	}
	return nil, &ConfigError{Reason: fmt.Sprintf("spec.previews.provider %q: previews post to github, gitlab, gitea or bitbucket", cfg.Provider)}
}

// Defaults fills in the provider, API URL and repository that a Git URL
// implies: github.com, gitlab.com and any host with provider set.
func Defaults(gitURL, provider, apiURL, repository string) (string, string, string) {
	host, path := hostPath(gitURL)
	if provider == "" {
		switch host {
		case "github.com":
			provider = "github"
		case "gitlab.com":
			provider = "gitlab"
		case "bitbucket.org":
			provider = "bitbucket"
		}
	}
	if repository == "" {
		repository = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	}
	if apiURL == "" && host != "" {
		switch {
		case provider == "github" && host == "github.com":
			apiURL = "https://api.github.com"
		case provider == "github":
			apiURL = "https://" + host + "/api/v3" // GitHub Enterprise Server
		case provider == "gitlab":
			apiURL = "https://" + host + "/api/v4"
		case provider == "gitea":
			apiURL = "https://" + host + "/api/v1"
		case provider == "bitbucket" && host == "bitbucket.org":
			apiURL = "https://api.bitbucket.org/2.0"
		}
	}
	return provider, apiURL, repository
}

// hostPath splits a Git URL of any form (https://h/p, ssh://git@h:22/p,
// git@h:p) into its host, without port, and path.
func hostPath(raw string) (string, string) {
	if !strings.Contains(raw, "://") {
		// scp-like: [user@]host:path
		at := strings.LastIndex(raw[:max(strings.Index(raw, ":"), 0)], "@")
		rest := raw[at+1:]
		host, path, ok := strings.Cut(rest, ":")
		if !ok {
			return "", ""
		}
		return strings.ToLower(host), path
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", ""
	}
	return strings.ToLower(u.Hostname()), u.Path
}

// The labels kept of one pull request: at most maxLabels, each at most
// labelMax bytes, so that a request annotation stays small.
const (
	maxLabels = 20
	labelMax  = 100
)

// BoundLabels is in without empty or over-long labels, at most 20 of them.
func BoundLabels(in []string) []string {
	var out []string
	for _, l := range in {
		if l == "" || len(l) > labelMax {
			continue
		}
		out = append(out, l)
		if len(out) == maxLabels {
			break
		}
	}
	return out
}
