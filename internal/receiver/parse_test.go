package receiver

import (
	"net/http"
	"slices"
	"testing"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// Seeds: one real-shaped body per sender; also the fuzz corpus.
var (
	githubPushBody = `{"ref":"refs/heads/main","after":"abc","repository":{"clone_url":"https://github.com/org/app.git","ssh_url":"git@github.com:org/app.git","html_url":"https://github.com/org/app","default_branch":"main"}}`
	gitlabPushBody = `{"object_kind":"push","ref":"refs/heads/dev","project":{"git_http_url":"https://gitlab.com/org/app.git","git_ssh_url":"git@gitlab.com:org/app.git","web_url":"https://gitlab.com/org/app","default_branch":"main"}}`
	giteaPushBody  = `{"ref":"refs/tags/v1.2.3","repository":{"clone_url":"https://gitea.example/org/app.git","ssh_url":"ssh://git@gitea.example/org/app.git"}}`
	bbServerBody   = `{"eventKey":"repo:refs_changed","changes":[{"ref":{"id":"refs/heads/main","type":"BRANCH"}},{"refId":"refs/tags/v2"}],"repository":{"links":{"clone":[{"href":"https://bb.example/scm/org/app.git","name":"http"},{"href":"ssh://git@bb.example:7999/org/app.git","name":"ssh"}]}}}`
	bbCloudBody    = `{"push":{"changes":[{"new":{"type":"branch","name":"main"}},{"new":null}]},"repository":{"links":{"html":{"href":"https://bitbucket.org/org/app"}}}}`
	distBody       = `{"events":[{"action":"pull","target":{"repository":"infra/app","tag":"x"},"request":{"host":"reg.example:5000"}},{"action":"push","target":{"repository":"infra/app","tag":"1.0.0","url":"https://reg.example:5000/v2/infra/app/manifests/sha256:00"},"request":{"host":"reg.example:5000"}}]}`
	dockerHubBody  = `{"push_data":{"tag":"latest"},"repository":{"repo_name":"org/app"}}`
	harborBody     = `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"v1","resource_url":"harbor.example/proj/app:v1"}],"repository":{"repo_full_name":"proj/app"}}}`
)

func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		typ     string
		h       http.Header
		body    string
		want    Event
		invalid bool
	}{
		"github push": {typ: "github", h: hdr("X-GitHub-Event", "push"), body: githubPushBody, want: Event{Name: "push",
			Repositories: []string{"https://github.com/org/app.git", "git@github.com:org/app.git", "https://github.com/org/app"},
			Refs:         []string{"refs/heads/main"}, DefaultBranch: "main"}},
		"github ping":        {typ: "github", h: hdr("X-GitHub-Event", "ping"), body: `{"zen":"x"}`, want: Event{Name: "ping", Ping: true}},
		"github other event": {typ: "github", h: hdr("X-GitHub-Event", "issues"), body: `not json`, want: Event{Name: "issues"}},
		"github no header":   {typ: "github", body: githubPushBody, invalid: true},
		"github not json":    {typ: "github", h: hdr("X-GitHub-Event", "push"), body: `{`, invalid: true},
		"github no repo":     {typ: "github", h: hdr("X-GitHub-Event", "push"), body: `{"ref":"refs/heads/main"}`, invalid: true},
		"gitlab push": {typ: "gitlab", h: hdr("X-Gitlab-Event", "Push Hook"), body: gitlabPushBody, want: Event{Name: "Push Hook",
			Repositories: []string{"https://gitlab.com/org/app.git", "git@gitlab.com:org/app.git", "https://gitlab.com/org/app"},
			Refs:         []string{"refs/heads/dev"}, DefaultBranch: "main"}},
		"gitea tag": {typ: "gitea", h: hdr("X-Gitea-Event", "push"), body: giteaPushBody, want: Event{Name: "push",
			Repositories: []string{"https://gitea.example/org/app.git", "ssh://git@gitea.example/org/app.git"},
			Refs:         []string{"refs/tags/v1.2.3"}}},
		"bitbucket server": {typ: "bitbucket", h: hdr("X-Event-Key", "repo:refs_changed"), body: bbServerBody, want: Event{Name: "repo:refs_changed",
			Repositories: []string{"https://bb.example/scm/org/app.git", "ssh://git@bb.example:7999/org/app.git"},
			Refs:         []string{"refs/heads/main", "refs/tags/v2"}}},
		"bitbucket cloud": {typ: "bitbucket", h: hdr("X-Event-Key", "repo:push"), body: bbCloudBody, want: Event{Name: "repo:push",
			Repositories: []string{"https://bitbucket.org/org/app"}, Refs: []string{"refs/heads/main"}}},
		"bitbucket ping": {typ: "bitbucket", h: hdr("X-Event-Key", "diagnostics:ping"), want: Event{Name: "diagnostics:ping", Ping: true}},
		"generic empty":  {typ: "generic", body: "", want: Event{}},
		"generic full": {typ: "generic-hmac", h: hdr("X-Event", "deploy"), body: `{"repository":"https://h/o/r","ref":"main","tag":"v1"}`,
			want: Event{Name: "deploy", Repositories: []string{"https://h/o/r"}, Refs: []string{"refs/heads/main", "refs/tags/v1"}}},
		"generic bad": {typ: "generic", body: "[1]", invalid: true},
		"distribution": {typ: "oci", body: distBody, want: Event{Name: "push", OCI: true,
			Repositories: []string{"reg.example:5000/infra/app"}, Tags: []string{"1.0.0"}}},
		"distribution pulls only": {typ: "oci", body: `{"events":[{"action":"pull","target":{"repository":"a/b"},"request":{"host":"h"}}]}`,
			want: Event{Name: "pull", OCI: true}},
		"docker hub": {typ: "oci", body: dockerHubBody, want: Event{Name: "push", OCI: true,
			Repositories: []string{"docker.io/org/app"}, Tags: []string{"latest"}}},
		"harbor": {typ: "oci", body: harborBody, want: Event{Name: "push", OCI: true,
			Repositories: []string{"harbor.example/proj/app"}, Tags: []string{"v1"}}},
		"oci unknown":  {typ: "oci", body: `{"x":1}`, invalid: true},
		"unknown type": {typ: "svn", body: "{}", invalid: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.typ, tc.h, []byte(tc.body))
			if tc.invalid {
				if _, ok := err.(*InvalidEventError); !ok {
					t.Fatalf("err = %v, want *InvalidEventError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || got.Ping != tc.want.Ping || got.OCI != tc.want.OCI || got.DefaultBranch != tc.want.DefaultBranch ||
				!slices.Equal(got.Repositories, tc.want.Repositories) || !slices.Equal(got.Refs, tc.want.Refs) || !slices.Equal(got.Tags, tc.want.Tags) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNormalizeOCIRepository(t *testing.T) {
	for in, want := range map[string]string{
		"oci://Reg.Example:5000/infra/app":    "reg.example:5000/infra/app",
		"reg.example:5000/infra/app:1.0":      "reg.example:5000/infra/app",
		"reg.example/infra/app@sha256:00":     "reg.example/infra/app",
		"oci://index.docker.io/org/app":       "docker.io/org/app",
		"docker.io/nginx":                     "docker.io/library/nginx",
		"oci://registry-1.docker.io/org/app/": "docker.io/org/app",
		"nohost":                              "",
		"":                                    "",
	} {
		if got := NormalizeOCIRepository(in); got != want {
			t.Errorf("NormalizeOCIRepository(%q) = %q, want %q", in, got, want)
		}
	}
}
