package git

import (
	"context"
	"fmt"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/source"
)

// ResolveAny finds the commit of any reference of the Stack's repository a
// person names (`stackpilot preview --revision`): a full commit hash; a
// full reference name (refs/heads/x, refs/tags/v1, refs/pull/12/head,
// refs/merge-requests/12/head); "pull/12" for refs/pull/12/head; or a
// short name, a branch before a tag. It asks the server once, uncached:
// the answer must be what the server holds now.
func (k *Kind) ResolveAny(ctx context.Context, stack *v1alpha1.Stack, name string) (Revision, error) {
	name = strings.TrimSpace(name)
	if validCommit(name) {
		return Revision{Commit: name}, nil
	}
	if n, ok := strings.CutPrefix(name, "pull/"); ok && !strings.Contains(n, "/") {
		name = "refs/pull/" + n + "/head"
	}
	candidates := []string{name}
	if !strings.HasPrefix(name, "refs/") {
		candidates = []string{"refs/heads/" + name, "refs/tags/" + name}
	}
	auth, err := k.auth(ctx, stack)
	if err != nil {
		return Revision{}, err
	}
	url := stack.Spec.Source.Git.URL
	done := source.Request(source.KindGitLsRemote, url)
	remote := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: gogit.DefaultRemoteName, URLs: []string{url}})
	list, err := remote.ListContext(ctx, &gogit.ListOptions{Auth: auth.Method(), CABundle: auth.CABundle(), PeelingOption: gogit.AppendPeeled})
	done()
	if err != nil {
		return Revision{}, source.Failure(classify(err, "ls-remote", url, name, auth), v1alpha1.GitOperationFailedReason)
	}
	found := map[string]string{}
	for _, r := range list {
		if r.Type() != plumbing.HashReference {
			continue
		}
		n := r.Name().String()
		if peeled, ok := strings.CutSuffix(n, "^{}"); ok {
			found[peeled] = r.Hash().String() // an annotated tag's commit wins over the tag object
			continue
		}
		if _, ok := found[n]; !ok {
			found[n] = r.Hash().String()
		}
	}
	for _, c := range candidates {
		if commit, ok := found[c]; ok {
			return Revision{Name: shortName(c), Ref: c, Commit: commit}, nil
		}
	}
	return Revision{}, &source.NotFoundError{URL: source.RedactURL(url), Ref: fmt.Sprintf("%q (tried %s)", name, strings.Join(candidates, ", "))}
}
