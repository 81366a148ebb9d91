package forge

import (
	"context"
	"fmt"
)

// gitea speaks Gitea's (and Forgejo's) REST API (gitea.com/api/swagger):
// the same paths as GitHub's for files, comments and statuses, a "limit"
// page size, and a "token" authorization scheme.
type gitea struct {
	api  *api
	repo string
}

// giteaPage is the page size Gitea admits by default ([api]
// MAX_RESPONSE_ITEMS is 50).
const giteaPage = 50

// MaxCommentSize: Gitea sets no limit of its own; GitHub's is kept, so that
// a comment moved between forges fits.
func (g *gitea) MaxCommentSize() int { return 65536 - 1 }

func (g *gitea) path(format string, args ...any) string {
	return "/repos/" + g.repo + fmt.Sprintf(format, args...)
}

func (g *gitea) ChangedFiles(ctx context.Context, number int64) ([]string, bool, error) {
	return listFiles(ctx, g.api, g.path("/pulls/%d/files", number), "limit", giteaPage)
}

func (g *gitea) UpsertComment(ctx context.Context, number int64, id, marker, body string) (string, error) {
	return upsertIssueComment(ctx, g.api, g.path("/issues/%d/comments", number), g.path("/issues/comments/%s", "%s"), "limit", id, marker, body)
}

func (g *gitea) SetStatus(ctx context.Context, sha string, s Status) error {
	return postCommitStatus(ctx, g.api, g.path("/statuses/%s", sha), s)
}

func (g *gitea) OpenPullRequests(ctx context.Context, base string) ([]PullRequest, error) {
	return listPulls(ctx, g.api, g.path("/pulls"), "limit", giteaPage, base)
}
