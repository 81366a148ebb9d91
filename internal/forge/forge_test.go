package forge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/forge"
	"github.com/stackpilot/stackpilot/internal/forge/forgetest"
)

const token = "forge-token-s3cret"

// TestClients drives each forge's client against the recording forge:
// every request is one its API documents, with its own auth header.
func TestClients(t *testing.T) {
	srv := forgetest.New(t, token)
	ctx := context.Background()
	const repo = "org/app"
	head := strings.Repeat("ab", 20)
	for _, name := range []string{forgetest.GitHub, forgetest.GitLab, forgetest.Gitea, forgetest.Bitbucket} {
		t.Run(name, func(t *testing.T) {
			c, err := forge.New(forge.Config{Provider: name, APIURL: srv.APIURL(name), Repository: repo, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			// Files: more than one page, both names of nothing renamed.
			var files []string
			for i := range 120 {
				files = append(files, fmt.Sprintf("dir/f%03d.yaml", i))
			}
			srv.SetFiles(name, repo, 7, files...)
			got, complete, err := c.ChangedFiles(ctx, 7)
			if err != nil || !complete || len(got) != 120 || got[119] != "dir/f119.yaml" {
				t.Fatalf("ChangedFiles = %d files (complete %v), %v", len(got), complete, err)
			}
			// Comment: created, edited by id, found again by its marker
			// when the id is lost; never a second one.
			id, err := c.UpsertComment(ctx, 7, "", "<!-- m -->", "<!-- m -->\nfirst")
			if err != nil || id == "" {
				t.Fatalf("create: %q, %v", id, err)
			}
			if id2, err := c.UpsertComment(ctx, 7, id, "<!-- m -->", "<!-- m -->\nsecond"); err != nil || id2 != id {
				t.Fatalf("edit: %q, %v", id2, err)
			}
			if id3, err := c.UpsertComment(ctx, 7, "", "<!-- m -->", "<!-- m -->\nthird"); err != nil || id3 != id {
				t.Fatalf("find by marker: %q, %v", id3, err)
			}
			comments := srv.Comments(name, repo, 7)
			if len(comments) != 1 || comments[0].Edits != 2 || !strings.HasSuffix(comments[0].Body, "third") {
				t.Fatalf("comments = %+v", comments)
			}
			// Statuses: every state maps to one the forge admits.
			for _, st := range []forge.State{forge.StatePending, forge.StateSuccess, forge.StateFailure, forge.StateCancelled} {
				if err := c.SetStatus(ctx, head, forge.Status{State: st, Context: "stackpilot/ns/a", Description: strings.Repeat("x", 300)}); err != nil {
					t.Fatalf("SetStatus(%s): %v", st, err)
				}
			}
			if n := len(srv.Statuses(name, repo, head)); n != 4 {
				t.Fatalf("%d statuses, want 4", n)
			}
			// Open pull requests into main, a fork's marked.
			srv.SetPulls(name, repo, forgetest.Pull{Number: 7, Head: head, Base: "main"},
				forgetest.Pull{Number: 8, Head: head, Base: "main", Fork: true, Labels: []string{"ok"}},
				forgetest.Pull{Number: 9, Head: head, Base: "dev"})
			pulls, err := c.OpenPullRequests(ctx, "main")
			if err != nil || len(pulls) != 2 || pulls[0].Fork || !pulls[1].Fork || pulls[0].Ref == "" || !strings.HasPrefix(head, pulls[0].Head) {
				t.Fatalf("OpenPullRequests = %+v, %v", pulls, err)
			}
			if name != forgetest.Bitbucket && pulls[1].Labels[0] != "ok" { // Bitbucket has no labels
				t.Fatalf("OpenPullRequests = %+v, %v", pulls, err)
			}
			// A wrong token: a 401 that says what to fix and repeats no token.
			bad, _ := forge.New(forge.Config{Provider: name, APIURL: srv.APIURL(name), Repository: repo, Token: "wrong-t0ken"})
			_, _, err = bad.ChangedFiles(ctx, 7)
			var apiErr *forge.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != 401 || !strings.Contains(err.Error(), "secretRef") || strings.Contains(err.Error(), "wrong-t0ken") {
				t.Fatalf("wrong token: %v", err)
			}
		})
	}
	for _, r := range srv.Requests() {
		if r.Code/100 == 2 && strings.Contains(r.Path, "%2F") != (r.Forge == forgetest.GitLab) {
			t.Errorf("%s %s %s: a GitLab project is one escaped segment, others owner/name", r.Forge, r.Method, r.Path)
		}
	}
}

func TestTouches(t *testing.T) {
	for _, tc := range []struct {
		files   []string
		dir     string
		include []string
		want    bool
	}{
		{[]string{"a/Pulumi.yaml"}, "a", nil, true},
		{[]string{"ab/Pulumi.yaml"}, "a", nil, false},
		{[]string{"b/x"}, "./a/", nil, false},
		{[]string{"shared/lib.yaml"}, "a", []string{"shared/"}, true},
		{[]string{"shared"}, "a", []string{"shared"}, true},
		{[]string{"README.md"}, "", nil, true},
		{nil, "", nil, false},
	} {
		if got := forge.Touches(tc.files, tc.dir, tc.include); got != tc.want {
			t.Errorf("Touches(%v, %q, %v) = %v", tc.files, tc.dir, tc.include, got)
		}
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct{ url, provider, wantProvider, wantAPI, wantRepo string }{
		{"https://github.com/org/app.git", "", "github", "https://api.github.com", "org/app"},
		{"git@github.com:org/app.git", "", "github", "https://api.github.com", "org/app"},
		{"https://gitlab.com/group/sub/app.git", "", "gitlab", "https://gitlab.com/api/v4", "group/sub/app"},
		{"ssh://git@gitea.example:2222/org/app.git", "gitea", "gitea", "https://gitea.example/api/v1", "org/app"},
		{"https://ghe.example/org/app", "github", "github", "https://ghe.example/api/v3", "org/app"},
		{"https://git.example/org/app", "", "", "", "org/app"},
	} {
		p, api, repo := forge.Defaults(tc.url, tc.provider, "", "")
		if p != tc.wantProvider || api != tc.wantAPI || repo != tc.wantRepo {
			t.Errorf("Defaults(%q, %q) = %q %q %q", tc.url, tc.provider, p, api, repo)
		}
	}
}

func TestBoundLabels(t *testing.T) {
	in := []string{"", strings.Repeat("x", 101), "ok"}
	for i := range 30 {
		in = append(in, fmt.Sprintf("l%d", i))
	}
	got := forge.BoundLabels(in)
	if len(got) != 20 || got[0] != "ok" {
		t.Fatalf("BoundLabels = %v", got)
	}
}
