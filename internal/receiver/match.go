package receiver

import (
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// Matches reports whether ev is about stack's source. Stacks on a Flux
// source (spec.source.sourceRef) never match: Flux's own Receiver tells
// source-controller, and the Stack follows the new artifact through its
// watch. A commit- or digest-pinned Stack never matches: a push cannot
// move it.
func Matches(stack *v1alpha1.Stack, ev Event) bool {
	src := stack.Spec.Source
	switch {
	case src.Git != nil && !ev.OCI:
		return matchesGit(src.Git, ev)
	case src.OCI != nil && ev.OCI:
		return matchesOCI(src.OCI, ev)
	case src.Git != nil || src.OCI != nil:
		// A generic event without a repository asks every Git and OCI Stack.
		return len(ev.Repositories) == 0 && len(ev.Refs) == 0 && !ev.OCI
	}
	return false
}

func matchesGit(g *v1alpha1.GitSource, ev Event) bool {
	if len(ev.Repositories) > 0 && !anyRepository(ev.Repositories, func(r string) bool { return git.SameRepository(r, g.URL) }) {
		return false
	}
	if len(ev.Refs) == 0 {
		return g.Ref == nil || g.Ref.Commit == ""
	}
	for _, ref := range ev.Refs {
		if gitRefMatches(g.Ref, ref, ev.DefaultBranch) {
			return true
		}
	}
	return false
}

func gitRefMatches(want *v1alpha1.GitRef, pushed, defaultBranch string) bool {
	if branch, ok := strings.CutPrefix(pushed, "refs/heads/"); ok {
		switch {
		case want == nil || (want.Branch == "" && want.Tag == "" && want.SemVer == "" && want.Commit == ""):
			// The remote HEAD: the default branch, when the sender says
			// which; else any branch (one ls-remote finds out).
			return defaultBranch == "" || defaultBranch == branch
		case want.Branch != "":
			return want.Branch == branch && want.Commit == ""
		}
		return false
	}
	if tag, ok := strings.CutPrefix(pushed, "refs/tags/"); ok && want != nil {
		switch {
		case want.Tag != "":
			return want.Tag == tag && want.Commit == ""
		case want.SemVer != "":
			return semverAdmits(want.SemVer, tag)
		}
	}
	return false
}

func matchesOCI(o *v1alpha1.OCISource, ev Event) bool {
	want := NormalizeOCIRepository(o.URL)
	if want == "" || !anyRepository(ev.Repositories, func(r string) bool { return NormalizeOCIRepository(r) == want }) {
		return false
	}
	ref := o.Ref
	if ref != nil && ref.Digest != "" {
		return false
	}
	for _, tag := range ev.Tags {
		switch {
		case ref != nil && ref.SemVer != "":
			if semverAdmits(ref.SemVer, tag) {
				return true
			}
		case ref != nil && ref.Tag != "":
			if ref.Tag == tag {
				return true
			}
		default:
			if tag == "latest" {
				return true
			}
		}
	}
	return false
}

func semverAdmits(constraint, tag string) bool {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return false
	}
	v, err := semver.NewVersion(tag)
	return err == nil && c.Check(v)
}

func anyRepository(repos []string, same func(string) bool) bool {
	for _, r := range repos {
		if r != "" && same(r) {
			return true
		}
	}
	return false
}
