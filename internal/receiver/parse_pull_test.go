package receiver

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

var (
	head = strings.Repeat("c", 40)
	// Shapes as the forges document them, trimmed to what we read.
	githubPullBody = `{"action":"synchronize","number":5,"pull_request":{"number":5,"html_url":"https://github.com/org/app/pull/5","state":"open",
		"head":{"ref":"feature","sha":"` + head + `","repo":{"full_name":"org/app"}},"base":{"ref":"main","repo":{"full_name":"org/app"}},
		"labels":[{"name":"infra"}]},"repository":{"clone_url":"https://github.com/org/app.git","html_url":"https://github.com/org/app"}}`
	githubForkClosedBody = `{"action":"closed","number":6,"pull_request":{"number":6,"state":"closed","merged":true,
		"head":{"ref":"main","sha":"` + head + `","repo":{"full_name":"someone/app"}},"base":{"ref":"main","repo":{"full_name":"org/app"}}},
		"repository":{"clone_url":"https://github.com/org/app.git"}}`
	gitlabMergeBody = `{"object_kind":"merge_request","project":{"git_http_url":"https://gitlab.com/org/app.git","web_url":"https://gitlab.com/org/app"},
		"object_attributes":{"iid":12,"action":"update","state":"opened","target_branch":"main","source_project_id":3,"target_project_id":4,
		"url":"https://gitlab.com/org/app/-/merge_requests/12","last_commit":{"id":"` + head + `"}},"labels":[{"title":"stackpilot/preview"}]}`
	giteaPullBody = `{"action":"opened","number":3,"pull_request":{"number":3,"html_url":"https://gitea.example/org/app/pulls/3",
		"head":{"ref":"f","sha":"` + head + `","repo":{"full_name":"org/app"}},"base":{"ref":"dev","repo":{"full_name":"org/app"}}},
		"repository":{"clone_url":"https://gitea.example/org/app.git"}}`
	bitbucketPullBody = `{"pullrequest":{"id":9,"state":"OPEN","source":{"branch":{"name":"feat"},"commit":{"hash":"cccccccccccc"},"repository":{"full_name":"org/app"}},
		"destination":{"branch":{"name":"main"},"repository":{"full_name":"org/app"}},"links":{"html":{"href":"https://bitbucket.org/org/app/pull-requests/9"}}},
		"repository":{"links":{"html":{"href":"https://bitbucket.org/org/app"}}}}`
)

func TestParsePullRequests(t *testing.T) {
	for name, tc := range map[string]struct {
		typ     string
		h       map[string]string
		body    string
		want    PullRequest
		invalid bool
	}{
		"github": {typ: "github", h: map[string]string{"X-GitHub-Event": "pull_request"}, body: githubPullBody, want: PullRequest{
			Number: 5, Action: "synchronize", Head: head, Ref: "refs/pull/5/head", Base: "main", Labels: []string{"infra"}, URL: "https://github.com/org/app/pull/5"}},
		"github fork merged": {typ: "github", h: map[string]string{"X-GitHub-Event": "pull_request"}, body: githubForkClosedBody, want: PullRequest{
			Number: 6, Action: "closed", Head: head, Ref: "refs/pull/6/head", Base: "main", Fork: true, Closed: true, Merged: true}},
		"gitlab": {typ: "gitlab", h: map[string]string{"X-Gitlab-Event": "Merge Request Hook"}, body: gitlabMergeBody, want: PullRequest{
			Number: 12, Action: "update", Head: head, Ref: "refs/merge-requests/12/head", Base: "main", Fork: true,
			Labels: []string{"stackpilot/preview"}, URL: "https://gitlab.com/org/app/-/merge_requests/12"}},
		"gitea": {typ: "gitea", h: map[string]string{"X-Gitea-Event": "pull_request"}, body: giteaPullBody, want: PullRequest{
			Number: 3, Action: "opened", Head: head, Ref: "refs/pull/3/head", Base: "dev", URL: "https://gitea.example/org/app/pulls/3"}},
		"bitbucket": {typ: "bitbucket", h: map[string]string{"X-Event-Key": "pullrequest:updated"}, body: bitbucketPullBody, want: PullRequest{
			Number: 9, Action: "pullrequest:updated", Head: "cccccccccccc", Ref: "refs/heads/feat", Base: "main", URL: "https://bitbucket.org/org/app/pull-requests/9"}},
		"github no head": {typ: "github", h: map[string]string{"X-GitHub-Event": "pull_request"}, body: `{"number":1,"pull_request":{"base":{"ref":"main"}}}`, invalid: true},
		"gitlab no iid":  {typ: "gitlab", h: map[string]string{"X-Gitlab-Event": "Merge Request Hook"}, body: `{"object_attributes":{}}`, invalid: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := hdr()
			for k, v := range tc.h {
				h.Set(k, v)
			}
			ev, err := Parse(tc.typ, h, []byte(tc.body))
			if tc.invalid {
				if err == nil {
					t.Fatalf("want an error, got %+v", ev)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.PullRequest == nil || !reflect.DeepEqual(*ev.PullRequest, tc.want) {
				t.Fatalf("pull request = %+v\nwant          %+v", ev.PullRequest, tc.want)
			}
			if len(ev.Repositories) == 0 {
				t.Fatal("no repository")
			}
		})
	}
}

func TestMatchesPullRequest(t *testing.T) {
	ev, err := Parse("github", hdr("X-GitHub-Event", "pull_request"), []byte(githubPullBody))
	if err != nil {
		t.Fatal(err)
	}
	stack := func(url, branch string, enabled bool) *v1alpha1.Stack {
		s := &v1alpha1.Stack{}
		s.Spec.Source.Git = &v1alpha1.GitSource{URL: url, Ref: &v1alpha1.GitRef{Branch: branch}}
		s.Spec.Previews = &v1alpha1.Previews{Enabled: enabled}
		return s
	}
	for name, tc := range map[string]struct {
		s    *v1alpha1.Stack
		want bool
	}{
		"same repository and base": {stack("git@github.com:org/app.git", "main", true), true},
		"previews off":             {stack("https://github.com/org/app", "main", false), false},
		"another branch":           {stack("https://github.com/org/app", "dev", true), false},
		"another repository":       {stack("https://github.com/org/other", "main", true), false},
		"no previews spec": {func() *v1alpha1.Stack {
			s := stack("https://github.com/org/app", "main", true)
			s.Spec.Previews = nil
			return s
		}(), false},
	} {
		if got := MatchesPullRequest(tc.s, ev); got != tc.want {
			t.Errorf("%s: MatchesPullRequest = %v, want %v", name, got, tc.want)
		}
	}
}
