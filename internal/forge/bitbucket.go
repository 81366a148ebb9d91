package forge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// bitbucket speaks Bitbucket Cloud's REST API 2.0
// (developer.atlassian.com/cloud/bitbucket/rest): pull request diffstat
// and comments, commit build statuses, open pull requests; pages carry
// "next" while more follow.
type bitbucket struct {
	api  *api
	repo string // workspace/repo_slug
}

// MaxCommentSize: Bitbucket Cloud refuses comments over 32,768 characters.
func (b *bitbucket) MaxCommentSize() int { return 32768 }

func (b *bitbucket) path(format string, args ...any) string {
	return "/repositories/" + b.repo + fmt.Sprintf(format, args...)
}

// bbPage is one page of a Bitbucket listing.
type bbPage[T any] struct {
	Values []T    `json:"values"`
	Next   string `json:"next"`
}

// bbList reads every page of path (at most maxPages) and says whether it
// reached the end.
func bbList[T any](ctx context.Context, a *api, path string, query url.Values, each func(T)) (bool, error) {
	for page := 1; page <= maxPages; page++ {
		q := url.Values{"pagelen": {"50"}, "page": {strconv.Itoa(page)}}
		for k, v := range query {
			q[k] = v
		}
		var got bbPage[T]
		if err := a.do(ctx, http.MethodGet, path, q, nil, &got); err != nil {
			return false, err
		}
		for _, v := range got.Values {
			each(v)
		}
		if got.Next == "" {
			return true, nil
		}
	}
	return false, nil
}

func (b *bitbucket) ChangedFiles(ctx context.Context, number int64) ([]string, bool, error) {
	var files []string
	complete, err := bbList(ctx, b.api, b.path("/pullrequests/%d/diffstat", number), nil, func(d struct {
		Old *struct {
			Path string `json:"path"`
		} `json:"old"`
		New *struct {
			Path string `json:"path"`
		} `json:"new"`
	}) {
		if d.New != nil {
			files = append(files, d.New.Path)
		}
		if d.Old != nil && (d.New == nil || d.Old.Path != d.New.Path) {
			files = append(files, d.Old.Path)
		}
	})
	return files, complete, err
}

type bbComment struct {
	ID      int64 `json:"id"`
	Content struct {
		Raw string `json:"raw"`
	} `json:"content"`
}

func (b *bitbucket) UpsertComment(ctx context.Context, number int64, id, marker, body string) (string, error) {
	comments := b.path("/pullrequests/%d/comments", number)
	in := map[string]any{"content": map[string]string{"raw": body}}
	edit := func(id string) error { return b.api.do(ctx, http.MethodPut, comments+"/"+id, nil, in, nil) }
	find := func(marker string) (string, error) {
		var found string
		_, err := bbList(ctx, b.api, comments, nil, func(c bbComment) {
			if strings.Contains(c.Content.Raw, marker) {
				found = strconv.FormatInt(c.ID, 10)
			}
		})
		return found, err
	}
	create := func() (string, error) {
		var created bbComment
		if err := b.api.do(ctx, http.MethodPost, comments, nil, in, &created); err != nil {
			return "", err
		}
		return strconv.FormatInt(created.ID, 10), nil
	}
	return upsert(id, marker, edit, find, create)
}

// bitbucketStates maps a status to Bitbucket's build states.
var bitbucketStates = map[State]string{StatePending: "INPROGRESS", StateSuccess: "SUCCESSFUL", StateFailure: "FAILED", StateCancelled: "STOPPED"}

// SetStatus sets a build status. Bitbucket keys a status by at most 40
// characters and needs a URL: the key is a digest of the context (the name
// carries the context itself), the URL the target or the repository's page.
func (b *bitbucket) SetStatus(ctx context.Context, sha string, s Status) error {
	sum := sha256.Sum256([]byte(s.Context))
	target := s.TargetURL
	if target == "" {
		target = "https://bitbucket.org/" + b.repo
	}
	in := map[string]string{"key": "stackpilot-" + hex.EncodeToString(sum[:])[:29], "state": bitbucketStates[s.State],
		"name": cut(s.Context, 255), "description": cut(s.Description, 255), "url": target}
	return b.api.do(ctx, http.MethodPost, b.path("/commit/%s/statuses/build", sha), nil, in, nil)
}

// BitbucketPull is a pull request object as Bitbucket Cloud's REST API
// lists it and its pullrequest:* webhooks carry it (the part read).
type BitbucketPull struct {
	ID     int64  `json:"id"`
	State  string `json:"state"`
	Source struct {
		Branch struct {
			Name string `json:"name"`
		} `json:"branch"`
		Commit struct {
			Hash string `json:"hash"`
		} `json:"commit"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	} `json:"source"`
	Destination struct {
		Branch struct {
			Name string `json:"name"`
		} `json:"branch"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	} `json:"destination"`
	Links struct {
		HTML struct {
			Href string `json:"href"`
		} `json:"html"`
	} `json:"links"`
}

// PullRequest is p as previews use it. Bitbucket keeps no reference to a
// pull request's head in the base repository, and abbreviates the commit:
// the head is read from the source branch.
func (p BitbucketPull) PullRequest() PullRequest {
	return PullRequest{Number: p.ID, Head: p.Source.Commit.Hash, Ref: "refs/heads/" + p.Source.Branch.Name,
		Base: p.Destination.Branch.Name, URL: p.Links.HTML.Href,
		Fork: !strings.EqualFold(p.Source.Repository.FullName, p.Destination.Repository.FullName)}
}

func (b *bitbucket) OpenPullRequests(ctx context.Context, base string) ([]PullRequest, error) {
	var out []PullRequest
	complete, err := bbList(ctx, b.api, b.path("/pullrequests"), url.Values{"state": {"OPEN"}}, func(p BitbucketPull) {
		if p.Destination.Branch.Name == base {
			out = append(out, p.PullRequest())
		}
	})
	if err == nil && !complete {
		err = fmt.Errorf("GET %s: more than %d pages of open pull requests", b.path("/pullrequests"), maxPages)
	}
	return out, err
}
