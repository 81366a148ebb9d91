package forge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// gitLab speaks GitLab's REST API v4 (docs.gitlab.com/api): merge request
// diffs, notes and commit statuses of a project named by its escaped path.
type gitLab struct {
	api     *api
	project string // url.PathEscape'd full path
}

// MaxCommentSize: GitLab admits notes of up to 1,000,000 characters.
func (g *gitLab) MaxCommentSize() int { return 1000000 }

func (g *gitLab) path(format string, args ...any) string {
	return "/projects/" + g.project + fmt.Sprintf(format, args...)
}

func (g *gitLab) ChangedFiles(ctx context.Context, number int64) ([]string, bool, error) {
	var files []string
	complete, err := pages(ctx, 100, func(page int) (int, error) {
		var got []struct {
			OldPath string `json:"old_path"`
			NewPath string `json:"new_path"`
		}
		if err := g.api.do(ctx, http.MethodGet, g.path("/merge_requests/%d/diffs", number), pageQuery("per_page", 100, page), nil, &got); err != nil {
			return 0, err
		}
		for _, f := range got {
			files = append(files, f.NewPath)
			if f.OldPath != "" && f.OldPath != f.NewPath {
				files = append(files, f.OldPath)
			}
		}
		return len(got), nil
	})
	return files, complete, err
}

type gitLabNote struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

func (g *gitLab) UpsertComment(ctx context.Context, number int64, id, marker, body string) (string, error) {
	notes := g.path("/merge_requests/%d/notes", number)
	in := map[string]string{"body": body}
	edit := func(id string) error { return g.api.do(ctx, http.MethodPut, notes+"/"+id, nil, in, nil) }
	find := func(marker string) (string, error) {
		var found string
		_, err := pages(ctx, 100, func(page int) (int, error) {
			var got []gitLabNote
			if err := g.api.do(ctx, http.MethodGet, notes, pageQuery("per_page", 100, page), nil, &got); err != nil {
				return 0, err
			}
			for _, n := range got {
				if strings.Contains(n.Body, marker) {
					found = strconv.FormatInt(n.ID, 10)
				}
			}
			return len(got), nil
		})
		return found, err
	}
	create := func() (string, error) {
		var created gitLabNote
		if err := g.api.do(ctx, http.MethodPost, notes, nil, in, &created); err != nil {
			return "", err
		}
		return strconv.FormatInt(created.ID, 10), nil
	}
	return upsert(id, marker, edit, find, create)
}

// gitLabStates maps a status to GitLab's commit status states.
var gitLabStates = map[State]string{StatePending: "running", StateSuccess: "success", StateFailure: "failed", StateCancelled: "canceled"}

func (g *gitLab) SetStatus(ctx context.Context, sha string, s Status) error {
	in := map[string]string{"state": gitLabStates[s.State], "name": s.Context, "description": cut(s.Description, 255)}
	if s.TargetURL != "" {
		in["target_url"] = s.TargetURL
	}
	return g.api.do(ctx, http.MethodPost, g.path("/statuses/%s", sha), nil, in, nil)
}

func (g *gitLab) OpenPullRequests(ctx context.Context, base string) ([]PullRequest, error) {
	var out []PullRequest
	complete, err := pages(ctx, 100, func(page int) (int, error) {
		var got []struct {
			IID             int64    `json:"iid"`
			SHA             string   `json:"sha"`
			SourceProjectID int64    `json:"source_project_id"`
			TargetProjectID int64    `json:"target_project_id"`
			TargetBranch    string   `json:"target_branch"`
			WebURL          string   `json:"web_url"`
			Labels          []string `json:"labels"`
		}
		q := pageQuery("per_page", 100, page, "state", "opened", "target_branch", base)
		if err := g.api.do(ctx, http.MethodGet, g.path("/merge_requests"), q, nil, &got); err != nil {
			return 0, err
		}
		for _, m := range got {
			if m.TargetBranch != base {
				continue
			}
			out = append(out, PullRequest{Number: m.IID, Head: m.SHA, Ref: fmt.Sprintf("refs/merge-requests/%d/head", m.IID),
				Base: m.TargetBranch, Fork: m.SourceProjectID != m.TargetProjectID, Labels: m.Labels, URL: m.WebURL})
		}
		return len(got), nil
	})
	if err == nil && !complete {
		err = fmt.Errorf("GET %s: more than %d pages of open merge requests", g.path("/merge_requests"), maxPages)
	}
	return out, err
}
