package forge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// gitHub speaks GitHub's REST API (docs.github.com/rest): pulls/{n}/files,
// issues/{n}/comments, issues/comments/{id}, statuses/{sha}, pulls.
type gitHub struct {
	api  *api
	repo string
}

// gitHubMaxFiles: GitHub lists at most 3,000 files of a pull request.
const gitHubMaxFiles = 3000

func (g *gitHub) MaxCommentSize() int { return 65536 - 1 }

func (g *gitHub) path(format string, args ...any) string {
	return "/repos/" + g.repo + fmt.Sprintf(format, args...)
}

func (g *gitHub) ChangedFiles(ctx context.Context, number int64) ([]string, bool, error) {
	return listFiles(ctx, g.api, g.path("/pulls/%d/files", number), "per_page", 100)
}

// listFiles reads GitHub's and Gitea's shape of a pull request's files.
func listFiles(ctx context.Context, a *api, path, sizeParam string, perPage int) ([]string, bool, error) {
	var files []string
	complete, err := pages(ctx, perPage, func(page int) (int, error) {
		var got []struct {
			Filename         string `json:"filename"`
			PreviousFilename string `json:"previous_filename"`
		}
		if err := a.do(ctx, http.MethodGet, path, pageQuery(sizeParam, perPage, page), nil, &got); err != nil {
			return 0, err
		}
		for _, f := range got {
			files = append(files, f.Filename)
			if f.PreviousFilename != "" {
				files = append(files, f.PreviousFilename)
			}
		}
		return len(got), nil
	})
	if len(files) >= gitHubMaxFiles {
		complete = false
	}
	return files, complete, err
}

type issueComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

func (g *gitHub) UpsertComment(ctx context.Context, number int64, id, marker, body string) (string, error) {
	return upsertIssueComment(ctx, g.api, g.path("/issues/%d/comments", number), g.path("/issues/comments/%s", "%s"), "per_page", id, marker, body)
}

// upsertIssueComment keeps GitHub's and Gitea's comment: PATCH by id,
// the issue's comments listed to find the marker, POST to create.
func upsertIssueComment(ctx context.Context, a *api, listPath, editPath, sizeParam, id, marker, body string) (string, error) {
	in := map[string]string{"body": body}
	edit := func(id string) error {
		return a.do(ctx, http.MethodPatch, fmt.Sprintf(editPath, id), nil, in, nil)
	}
	find := func(marker string) (string, error) {
		var found string
		_, err := pages(ctx, 50, func(page int) (int, error) {
			var got []issueComment
			if err := a.do(ctx, http.MethodGet, listPath, pageQuery(sizeParam, 50, page), nil, &got); err != nil {
				return 0, err
			}
			for _, c := range got {
				if strings.Contains(c.Body, marker) {
					found = strconv.FormatInt(c.ID, 10)
				}
			}
			return len(got), nil
		})
		return found, err
	}
	create := func() (string, error) {
		var created issueComment
		if err := a.do(ctx, http.MethodPost, listPath, nil, in, &created); err != nil {
			return "", err
		}
		return strconv.FormatInt(created.ID, 10), nil
	}
	return upsert(id, marker, edit, find, create)
}

func (g *gitHub) SetStatus(ctx context.Context, sha string, s Status) error {
	return postCommitStatus(ctx, g.api, g.path("/statuses/%s", sha), s)
}

// postCommitStatus is GitHub's and Gitea's commit status (their states are
// named alike: pending, success, failure).
func postCommitStatus(ctx context.Context, a *api, path string, s Status) error {
	state := string(s.State)
	if s.State == StateCancelled {
		state = "error"
	}
	in := map[string]string{"state": state, "context": s.Context, "description": cut(s.Description, 140)}
	if s.TargetURL != "" {
		in["target_url"] = s.TargetURL
	}
	return a.do(ctx, http.MethodPost, path, nil, in, nil)
}

// GitHubPull is a pull request object as GitHub's and Gitea's REST APIs
// list it and their pull_request webhooks carry it (the part read).
type GitHubPull struct {
	Number  int64  `json:"number"`
	HTMLURL string `json:"html_url"`
	Merged  bool   `json:"merged"`
	State   string `json:"state"`
	Head    struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"head"`
	Base struct {
		Ref  string `json:"ref"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"base"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

// PullRequest is p as previews use it: its head is kept at
// refs/pull/<number>/head of the base repository, a fork's too.
func (p GitHubPull) PullRequest() PullRequest {
	pr := PullRequest{Number: p.Number, Head: p.Head.SHA, Ref: fmt.Sprintf("refs/pull/%d/head", p.Number),
		Base: strings.TrimPrefix(p.Base.Ref, "refs/heads/"), URL: p.HTMLURL,
		Fork: p.Head.Repo == nil || p.Base.Repo == nil || !strings.EqualFold(p.Head.Repo.FullName, p.Base.Repo.FullName)}
	for _, l := range p.Labels {
		pr.Labels = append(pr.Labels, l.Name)
	}
	return pr
}

func (g *gitHub) OpenPullRequests(ctx context.Context, base string) ([]PullRequest, error) {
	return listPulls(ctx, g.api, g.path("/pulls"), "per_page", 100, base, "base", base)
}

// listPulls lists GitHub's or Gitea's open pull requests into base.
func listPulls(ctx context.Context, a *api, path, sizeParam string, perPage int, base string, extra ...string) ([]PullRequest, error) {
	var out []PullRequest
	complete, err := pages(ctx, perPage, func(page int) (int, error) {
		var got []GitHubPull
		q := pageQuery(sizeParam, perPage, page, append([]string{"state", "open"}, extra...)...)
		if err := a.do(ctx, http.MethodGet, path, q, nil, &got); err != nil {
			return 0, err
		}
		for _, p := range got {
			if p.Base.Ref == base {
				out = append(out, p.PullRequest())
			}
		}
		return len(got), nil
	})
	if err == nil && !complete {
		err = fmt.Errorf("GET %s: more than %d pages of open pull requests", path, maxPages)
	}
	return out, err
}
