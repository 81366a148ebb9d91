package git

import (
	"context"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/stackpilot/stackpilot/internal/source"
)

// remoteRefs is what one ls-remote tells us: branches and tags (tags
// peeled to the commit they mark), and where HEAD points.
type remoteRefs struct {
	fetched time.Time
	// started is when the request that got this listing was made: what
	// it shows is at least as new as that.
	started time.Time
	// head is HEAD's target ("refs/heads/main"), when the server says.
	head string
	// headCommit is the commit HEAD resolves to.
	headCommit string
	// refs maps "refs/heads/x" and "refs/tags/x" to commits.
	refs map[string]string
}

// listRefs asks the server for its references: one round trip, no
// objects, whatever the size of the repository.
func listRefs(ctx context.Context, url string, auth *Auth) (*remoteRefs, error) {
	defer source.Request(source.KindGitLsRemote, url)()
	remote := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: gogit.DefaultRemoteName, URLs: []string{url}})
	list, err := remote.ListContext(ctx, &gogit.ListOptions{
		Auth:          auth.Method(),
		CABundle:      auth.CABundle(),
		PeelingOption: gogit.AppendPeeled,
	})
	if err != nil {
		return nil, err
	}
	out := &remoteRefs{refs: map[string]string{}}
	peeled := map[string]string{}
	for _, r := range list {
		name := r.Name().String()
		switch {
		case name == "HEAD" && r.Type() == plumbing.SymbolicReference:
			out.head = r.Target().String()
		case name == "HEAD":
			out.headCommit = r.Hash().String()
		case strings.HasSuffix(name, "^{}"):
			peeled[strings.TrimSuffix(name, "^{}")] = r.Hash().String()
		case strings.HasPrefix(name, "refs/heads/"), strings.HasPrefix(name, "refs/tags/"):
			if r.Type() == plumbing.HashReference {
				out.refs[name] = r.Hash().String()
			}
		}
	}
	// An annotated tag's own hash names the tag object; the "^{}" entry
	// names the commit, which is what we check out.
	for name, commit := range peeled {
		out.refs[name] = commit
	}
	if out.head != "" {
		out.headCommit = out.refs[out.head]
	} else if out.headCommit != "" {
		out.head = guessHead(out.refs, out.headCommit)
	}
	return out, nil
}

// guessHead finds the branch HEAD points at when the server does not
// advertise it (no symref capability), preferring main and master as git
// clone does.
func guessHead(refs map[string]string, commit string) string {
	for _, b := range []string{"refs/heads/main", "refs/heads/master"} {
		if refs[b] == commit {
			return b
		}
	}
	best := ""
	for name, c := range refs {
		if c == commit && strings.HasPrefix(name, "refs/heads/") && (best == "" || name < best) {
			best = name
		}
	}
	return best
}
