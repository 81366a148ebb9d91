package receiver

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func gitStack(url string, ref *v1alpha1.GitRef) *v1alpha1.Stack {
	return &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: url, Ref: ref}}}}
}

func ociStack(url string, ref *v1alpha1.OCIRef) *v1alpha1.Stack {
	return &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{OCI: &v1alpha1.OCISource{URL: url, Ref: ref}}}}
}

// matchStacks is one Stack of each shape, for the fuzz target.
func matchStacks(url, constraint, tag string) []*v1alpha1.Stack {
	return []*v1alpha1.Stack{
		gitStack(url, nil), gitStack(url, &v1alpha1.GitRef{Branch: tag}), gitStack(url, &v1alpha1.GitRef{Tag: tag}),
		gitStack(url, &v1alpha1.GitRef{SemVer: constraint}), ociStack("oci://"+url, &v1alpha1.OCIRef{SemVer: constraint}),
		ociStack("oci://"+url, nil), {Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{SourceRef: &v1alpha1.FluxSourceReference{Name: "x"}}}},
	}
}

func TestMatches(t *testing.T) {
	push := func(ref string, repos ...string) Event {
		return Event{Name: "push", Repositories: repos, Refs: []string{ref}, DefaultBranch: "main"}
	}
	const repo = "https://github.com/org/app.git"
	main := push("refs/heads/main", repo, "git@github.com:org/app.git")
	for name, tc := range map[string]struct {
		stack *v1alpha1.Stack
		ev    Event
		want  bool
	}{
		"branch":                    {gitStack("https://github.com/org/app", &v1alpha1.GitRef{Branch: "main"}), main, true},
		"ssh form of the same repo": {gitStack("ssh://git@GitHub.com/org/app.git", &v1alpha1.GitRef{Branch: "main"}), main, true},
		"scp form":                  {gitStack("git@github.com:org/app", &v1alpha1.GitRef{Branch: "main"}), main, true},
		"other branch":              {gitStack(repo, &v1alpha1.GitRef{Branch: "dev"}), main, false},
		"other repository":          {gitStack("https://github.com/org/other", &v1alpha1.GitRef{Branch: "main"}), main, false},
		"HEAD, default branch":      {gitStack(repo, nil), main, true},
		"HEAD, other branch":        {gitStack(repo, nil), push("refs/heads/dev", repo), false},
		"HEAD, default unknown":     {gitStack(repo, nil), Event{Repositories: []string{repo}, Refs: []string{"refs/heads/dev"}}, true},
		"commit pin":                {gitStack(repo, &v1alpha1.GitRef{Branch: "main", Commit: "0123456789012345678901234567890123456789"}), main, false},
		"tag":                       {gitStack(repo, &v1alpha1.GitRef{Tag: "v1.2.3"}), push("refs/tags/v1.2.3", repo), true},
		"other tag":                 {gitStack(repo, &v1alpha1.GitRef{Tag: "v1.2.3"}), push("refs/tags/v1.2.4", repo), false},
		"tag vs branch stack":       {gitStack(repo, &v1alpha1.GitRef{Branch: "main"}), push("refs/tags/main", repo), false},
		"semver in range":           {gitStack(repo, &v1alpha1.GitRef{SemVer: "1.x"}), push("refs/tags/v1.4.0", repo), true},
		"semver out of range":       {gitStack(repo, &v1alpha1.GitRef{SemVer: "1.x"}), push("refs/tags/v2.0.0", repo), false},
		"semver, not a version":     {gitStack(repo, &v1alpha1.GitRef{SemVer: "1.x"}), push("refs/tags/nightly", repo), false},
		"git event, OCI stack":      {ociStack("oci://github.com/org/app", nil), main, false},
		"flux stack":                {&v1alpha1.Stack{Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{SourceRef: &v1alpha1.FluxSourceReference{Name: "x"}}}}, main, false},
		"generic, no repository":    {gitStack(repo, &v1alpha1.GitRef{Branch: "dev"}), Event{}, true},
		"generic, repository only":  {gitStack(repo, &v1alpha1.GitRef{Branch: "dev"}), Event{Repositories: []string{"https://github.com/org/app"}}, true},
		"generic, OCI stack":        {ociStack("oci://r/a", nil), Event{}, true},
		"generic, flux stack":       {&v1alpha1.Stack{Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{SourceRef: &v1alpha1.FluxSourceReference{Name: "x"}}}}, Event{}, false},

		"oci tag":            {ociStack("oci://reg.example:5000/infra/app", &v1alpha1.OCIRef{Tag: "1.0.0"}), ociPush("reg.example:5000/infra/app", "1.0.0"), true},
		"oci other tag":      {ociStack("oci://reg.example:5000/infra/app", &v1alpha1.OCIRef{Tag: "1.0.0"}), ociPush("reg.example:5000/infra/app", "1.0.1"), false},
		"oci other repo":     {ociStack("oci://reg.example:5000/infra/other", &v1alpha1.OCIRef{Tag: "1.0.0"}), ociPush("reg.example:5000/infra/app", "1.0.0"), false},
		"oci semver":         {ociStack("oci://reg.example/infra/app", &v1alpha1.OCIRef{SemVer: ">=1.0.0"}), ociPush("reg.example/infra/app", "1.2.0"), true},
		"oci latest":         {ociStack("oci://docker.io/org/app", nil), ociPush("docker.io/org/app", "latest"), true},
		"oci not latest":     {ociStack("oci://docker.io/org/app", nil), ociPush("docker.io/org/app", "v1"), false},
		"oci digest pin":     {ociStack("oci://r/a", &v1alpha1.OCIRef{Digest: "sha256:00"}), ociPush("r/a", "latest"), false},
		"oci event, git stk": {gitStack("https://reg.example/infra/app", nil), ociPush("reg.example/infra/app", "latest"), false},
	} {
		if got := Matches(tc.stack, tc.ev); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", name, got, tc.want)
		}
	}
}

func ociPush(repo, tag string) Event {
	return Event{Name: "push", OCI: true, Repositories: []string{repo}, Tags: []string{tag}}
}
