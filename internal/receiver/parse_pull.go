package receiver

import (
	"encoding/json"
	"fmt"

	"github.com/stackpilot/stackpilot/internal/forge"
)

// PullRequest is a pull (merge) request event: what to preview, or that a
// preview can go.
type PullRequest struct {
	// Number is the pull request's number (GitLab: the merge request's iid).
	Number int64
	// Action is what happened, in the sender's words ("opened",
	// "synchronize", "update", "pullrequest:updated").
	Action string
	// Head is the head commit; Ref the reference of the base repository
	// that holds it (refs/pull/N/head on GitHub and Gitea,
	// refs/merge-requests/N/head on GitLab, the source branch on
	// Bitbucket, which has no such reference).
	Head, Ref string
	// Base is the branch the pull request merges into.
	Base string
	// Fork is true when the head is in another repository than the base.
	Fork bool
	// Closed is true when the pull request was closed or merged; Merged
	// when merged.
	Closed, Merged bool
	// Labels are its labels (GitHub, GitLab, Gitea; Bitbucket has none).
	Labels []string
	// URL is its web page.
	URL string
}

// githubPull is the part of a GitHub or Gitea pull_request event we read.
type githubPull struct {
	Action      string           `json:"action"`
	Number      int64            `json:"number"`
	PullRequest forge.GitHubPull `json:"pull_request"`
	Repository  struct {
		CloneURL string `json:"clone_url"`
		SSHURL   string `json:"ssh_url"`
		HTMLURL  string `json:"html_url"`
		GitURL   string `json:"git_url"`
	} `json:"repository"`
}

// parseGitHubPull reads a GitHub or Gitea "pull_request" event. Both keep
// every pull request's head at refs/pull/<number>/head of the base
// repository, a fork's too.
func parseGitHubPull(ev Event, body []byte) (Event, error) {
	var p githubPull
	if err := json.Unmarshal(body, &p); err != nil {
		return ev, invalid("the body is not a JSON pull_request event: %v", err)
	}
	if p.PullRequest.Number == 0 {
		p.PullRequest.Number = p.Number
	}
	pr := p.PullRequest.PullRequest()
	if pr.Number <= 0 || pr.Head == "" || pr.Base == "" {
		return ev, invalid("the pull_request event names no number, head commit or base branch")
	}
	merged := p.PullRequest.Merged
	ev.PullRequest = &PullRequest{
		Number: pr.Number, Action: p.Action, Head: pr.Head, Ref: pr.Ref, Base: pr.Base, Fork: pr.Fork,
		Closed: p.Action == "closed" || p.PullRequest.State == "closed" || merged,
		Merged: merged,
		Labels: forge.BoundLabels(pr.Labels), URL: pr.URL,
	}
	r := p.Repository
	ev.Repositories = []string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL}
	return ev, requireRepository(ev)
}

// gitlabMerge is the part of a GitLab "Merge Request Hook" event we read.
type gitlabMerge struct {
	Project struct {
		GitHTTPURL string `json:"git_http_url"`
		GitSSHURL  string `json:"git_ssh_url"`
		WebURL     string `json:"web_url"`
	} `json:"project"`
	ObjectAttributes struct {
		IID             int64  `json:"iid"`
		Action          string `json:"action"`
		State           string `json:"state"`
		TargetBranch    string `json:"target_branch"`
		SourceProjectID int64  `json:"source_project_id"`
		TargetProjectID int64  `json:"target_project_id"`
		URL             string `json:"url"`
		LastCommit      struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
	Labels []struct {
		Title string `json:"title"`
	} `json:"labels"`
}

// parseGitLabMerge reads a GitLab "Merge Request Hook" event. GitLab keeps
// every merge request's head at refs/merge-requests/<iid>/head of the target
// project.
func parseGitLabMerge(ev Event, body []byte) (Event, error) {
	var p gitlabMerge
	if err := json.Unmarshal(body, &p); err != nil {
		return ev, invalid("the body is not a JSON GitLab merge request event: %v", err)
	}
	a := p.ObjectAttributes
	if a.IID <= 0 || a.LastCommit.ID == "" || a.TargetBranch == "" {
		return ev, invalid("the merge request event names no iid, last commit or target branch")
	}
	var labels []string
	for _, l := range p.Labels {
		labels = append(labels, l.Title)
	}
	ev.PullRequest = &PullRequest{
		Number: a.IID, Action: a.Action, Head: a.LastCommit.ID,
		Ref:    fmt.Sprintf("refs/merge-requests/%d/head", a.IID),
		Base:   a.TargetBranch,
		Fork:   a.SourceProjectID != a.TargetProjectID,
		Closed: a.Action == "close" || a.Action == "merge" || a.State == "closed" || a.State == "merged",
		Merged: a.Action == "merge" || a.State == "merged",
		Labels: forge.BoundLabels(labels), URL: a.URL,
	}
	ev.Repositories = []string{p.Project.GitHTTPURL, p.Project.GitSSHURL, p.Project.WebURL}
	return ev, requireRepository(ev)
}

// bitbucketPull is the part of a Bitbucket Cloud pullrequest:* event we read.
type bitbucketPull struct {
	PullRequest forge.BitbucketPull `json:"pullrequest"`
	Repository  struct {
		Links struct {
			Clone json.RawMessage `json:"clone"`
			HTML  json.RawMessage `json:"html"`
		} `json:"links"`
	} `json:"repository"`
}

// parseBitbucketPull reads a Bitbucket Cloud pull request event. Bitbucket
// keeps no reference to a pull request's head in the base repository, and
// its events give the head commit abbreviated: the head is fetched from the
// source branch (a fork's never runs: Bitbucket has no labels to allow it).
func parseBitbucketPull(ev Event, body []byte) (Event, error) {
	var p bitbucketPull
	if err := json.Unmarshal(body, &p); err != nil {
		return ev, invalid("the body is not a JSON Bitbucket pull request event: %v", err)
	}
	pr := p.PullRequest.PullRequest()
	if pr.Number <= 0 || pr.Head == "" || pr.Base == "" {
		return ev, invalid("the pull request event names no id, source commit or destination branch")
	}
	state := p.PullRequest.State
	ev.PullRequest = &PullRequest{
		Number: pr.Number, Action: ev.Name, Head: pr.Head, Ref: pr.Ref, Base: pr.Base, Fork: pr.Fork,
		Closed: ev.Name == "pullrequest:fulfilled" || ev.Name == "pullrequest:rejected" || state == "MERGED" || state == "DECLINED",
		Merged: ev.Name == "pullrequest:fulfilled" || state == "MERGED",
		URL:    pr.URL,
	}
	l := p.Repository.Links
	ev.Repositories = append(links(l.Clone), links(l.HTML)...)
	return ev, requireRepository(ev)
}
