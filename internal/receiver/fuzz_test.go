package receiver

import (
	"net/http"
	"testing"
)

// FuzzParse feeds every parser arbitrary bodies and event names: none may
// panic, and what comes out stays bounded.
func FuzzParse(f *testing.F) {
	seeds := []struct{ typ, event, body string }{
		{"github", "push", githubPushBody}, {"github", "ping", "{}"},
		{"gitea", "push", giteaPushBody}, {"gitlab", "Push Hook", gitlabPushBody},
		{"gitlab", "Tag Push Hook", `{"ref":"refs/tags/v1","project":{"web_url":"https://g/o/r"}}`},
		{"bitbucket", "repo:refs_changed", bbServerBody}, {"bitbucket", "repo:push", bbCloudBody},
		{"generic", "", ""}, {"generic-hmac", "x", `{"repository":"git@h:o/r","ref":"main"}`},
		{"oci", "", distBody}, {"oci", "", dockerHubBody}, {"oci", "", harborBody},
		{"oci", "", `{"events":null}`}, {"bitbucket", "repo:push", `{"repository":{"links":{"clone":"x"}}}`},
	}
	for _, s := range seeds {
		f.Add(s.typ, s.event, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, typ, event string, body []byte) {
		h := http.Header{}
		for _, name := range []string{"X-GitHub-Event", "X-Gitea-Event", "X-Gitlab-Event", "X-Event-Key", "X-Event"} {
			h.Set(name, event)
		}
		ev, err := Parse(typ, h, body)
		if err != nil {
			return
		}
		if len(ev.Repositories) > maxListed || len(ev.Refs) > maxListed || len(ev.Tags) > maxListed {
			t.Fatalf("unbounded event: %d repositories, %d refs, %d tags", len(ev.Repositories), len(ev.Refs), len(ev.Tags))
		}
		for _, r := range ev.Repositories {
			_ = NormalizeOCIRepository(r)
		}
	})
}

// FuzzVerify: no signature header value panics or passes without the token.
func FuzzVerify(f *testing.F) {
	f.Add("github", "sha256=00", []byte("{}"))
	f.Add("gitea", "zz", []byte(""))
	f.Add("gitlab", "token", []byte("x"))
	f.Add("generic-hmac", "sha256=", []byte("x"))
	token := []byte("the-token")
	f.Fuzz(func(t *testing.T, typ, sig string, body []byte) {
		h := http.Header{}
		for _, name := range []string{"X-Hub-Signature-256", "X-Hub-Signature", "X-Signature", "X-Gitea-Signature", "X-Gitlab-Token"} {
			h.Set(name, sig)
		}
		if Verify(typ, h, body, token, false) == nil && typ != "generic" && sig != "the-token" {
			t.Fatalf("%s accepted signature %q", typ, sig)
		}
	})
}

// FuzzMatch: matching any event against Stacks of each kind never panics.
func FuzzMatch(f *testing.F) {
	f.Add("https://h/o/r", "refs/heads/main", "1.x", "v1.2.3")
	f.Add("git@h:o/r", "refs/tags/v1.2.3", ">=1.0.0", "latest")
	f.Fuzz(func(t *testing.T, repo, ref, constraint, tag string) {
		ev := Event{Repositories: []string{repo}, Refs: []string{ref}, Tags: []string{tag}}
		for _, st := range matchStacks(repo, constraint, tag) {
			_ = Matches(st, ev)
			ev.OCI = !ev.OCI
			_ = Matches(st, ev)
		}
	})
}
