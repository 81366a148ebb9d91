package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/source"
)

// Fetcher puts the tree of a resolved revision into an artifact store,
// cloning only when the store does not know the revision yet, and once for
// any number of concurrent callers. It is safe for concurrent use.
type Fetcher struct {
	// Timeout bounds each fetch (clones and storing), whatever the
	// callers' contexts say: a fetch is shared, and one hung server must
	// not hold every Stack that waits for it.
	Timeout time.Duration
	// MaxSize bounds, each on its own, the objects a clone fetches (the
	// pack, as it streams in) and the files it checks out; MaxFiles bounds
	// the files (and links) checked out. A clone stops at the bound with a
	// *LimitError, and nothing of it is stored.
	MaxSize  int64
	MaxFiles int

	flight source.FlightGroup[artifact.Artifact]
	clones atomic.Int64
}

// DefaultFetchTimeout bounds one fetch.
const DefaultFetchTimeout = 10 * time.Minute

// NewFetcher returns a Fetcher.
func NewFetcher() *Fetcher {
	return &Fetcher{Timeout: DefaultFetchTimeout, MaxSize: DefaultMaxSize, MaxFiles: DefaultMaxFiles}
}

// Clones returns how many clones the Fetcher has made.
func (f *Fetcher) Clones() int64 { return f.clones.Load() }

// IndexKey is the store index key for a commit of url fetched with auth:
// "<url without userinfo>@<commit>", followed by "#<credentials digest>"
// when there are credentials. The credentials are part of the key so that
// a tree fetched with one Secret is never handed, without asking the
// server, to a Stack using other credentials (or none) that might not be
// allowed to read it. The content itself is still stored once.
func IndexKey(url, commit string, auth *Auth) string {
	key := source.RedactURL(url) + "@" + commit
	if d := credentialID(url, auth); d != "" {
		key += "#" + d
	}
	return key
}

// credentialID folds credentials written into the URL (discouraged, but
// git accepts them) into the Secret's digest.
func credentialID(url string, auth *Auth) string {
	if redacted := source.RedactURL(url); redacted != url {
		return digestData(map[string][]byte{"url": []byte(url), "auth": []byte(auth.Digest())})
	}
	return auth.Digest()
}

// Fetch returns the artifact holding rev's tree. If the store's index
// knows (url, commit) for these credentials, no network is used. Otherwise
// it clones shallowly (one commit deep, no tags): rev.Ref when the
// revision names one; else, or when the reference has moved on since it was
// resolved, the commit by hash; and only when the server refuses that, the
// full history. Every clone is bounded by MaxSize and MaxFiles. The
// checked-out commit is always rev.Commit.
func (f *Fetcher) Fetch(ctx context.Context, url string, rev Revision, auth *Auth, store *artifact.Store) (artifact.Artifact, error) {
	if !validCommit(rev.Commit) {
		return artifact.Artifact{}, &source.InvalidSpecError{Field: "revision", Value: rev.String(), Reason: "want a full commit hash"}
	}
	key := IndexKey(url, rev.Commit, auth)
	return source.FetchOnce(ctx, &f.flight, store, key, f.Timeout, func(ctx context.Context) (artifact.Artifact, error) {
		return f.fetch(ctx, url, rev, auth, store, key)
	})
}

func (f *Fetcher) fetch(ctx context.Context, url string, rev Revision, auth *Auth, store *artifact.Store, key string) (artifact.Artifact, error) {
	dir, err := f.checkout(ctx, url, rev, auth, store)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		return artifact.Artifact{}, err
	}
	a, err := store.Put(ctx, dir)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("storing %s: %w", rev, err)
	}
	if err := store.Link(key, a.Digest); err != nil {
		return artifact.Artifact{}, err
	}
	return a, nil
}

// checkout clones rev into a staging directory of the store and returns
// it; the caller removes it, also on error. Each attempt is bounded by
// MaxSize and MaxFiles; the first that reaches a bound ends the fetch.
func (f *Fetcher) checkout(ctx context.Context, url string, rev Revision, auth *Auth, store *artifact.Store) (string, error) {
	shallowRef := func(ctx context.Context, repo *gogit.Repository) error {
		return f.fetchShallow(ctx, repo, url, refSpec(rev.Ref), auth)
	}
	// The commit alone, one deep: servers that let a client ask for a commit
	// by hash (they advertise allow-reachable-sha1-in-want or
	// allow-tip-sha1-in-want, as the big hosts do) spare us the history;
	// go-git asks nothing of the others.
	shallowCommit := func(ctx context.Context, repo *gogit.Repository) error {
		return f.fetchShallow(ctx, repo, url, config.RefSpec(rev.Commit+":refs/heads/stackpilot-pinned"), auth)
	}
	// Everything, for servers that do not: the commit may be on any branch
	// or tag.
	all := func(ctx context.Context, repo *gogit.Repository) error {
		return f.fetchAll(ctx, repo, url, auth)
	}
	attempts := []func(context.Context, *gogit.Repository) error{shallowCommit, all}
	if rev.Ref != "" {
		attempts = append([]func(context.Context, *gogit.Repository) error{shallowRef}, attempts...)
	}
	var err error
	for i, run := range attempts {
		var dir string
		dir, err = store.TempDir("clone-")
		if err != nil {
			return "", err
		}
		budgets := f.budgets()
		err = f.attempt(ctx, dir, rev, budgets, run)
		if limit := budgets.exceeded(source.RedactURL(url), rev.String()); limit != nil {
			return dir, limit
		}
		if err == nil {
			return dir, nil
		}
		if i == len(attempts)-1 || !fallBack(ctx, err) {
			os.RemoveAll(dir)
			break
		}
		// The reference moved (or vanished) since it was resolved, or the
		// server will not give a commit by hash: try the next way.
		os.RemoveAll(dir)
	}
	if errors.Is(err, errCommitMissing) {
		return "", &source.NotFoundError{URL: source.RedactURL(url), Ref: "commit " + rev.Commit}
	}
	return "", classify(err, "clone", url, refLabel(rev), auth)
}

// errCommitMissing: what was fetched does not hold the commit.
var errCommitMissing = errors.New("commit not in what was fetched")

// fallBack says whether a failed attempt leaves another way worth trying:
// not when the server refused the credentials or the caller gave up.
func fallBack(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod), errors.Is(err, transport.ErrRepositoryNotFound):
		return false
	}
	return true
}

func (f *Fetcher) budgets() *cloneBudgets {
	maxSize, maxFiles := f.MaxSize, f.MaxFiles
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	return newCloneBudgets(maxSize, maxFiles)
}

// attempt initialises a repository in dir whose writes are charged to
// budgets, fetches with run and checks out rev.Commit.
func (f *Fetcher) attempt(ctx context.Context, dir string, rev Revision, budgets *cloneBudgets, run func(context.Context, *gogit.Repository) error) error {
	tree := &boundedFS{Filesystem: osfs.New(dir), bytes: budgets.tree, files: budgets.files}
	dot := &boundedFS{Filesystem: osfs.New(filepath.Join(dir, gogit.GitDirName)), bytes: budgets.pack}
	repo, err := gogit.Init(filesystem.NewStorage(dot, cache.NewObjectLRUDefault()), tree)
	if err != nil {
		return err
	}
	err = run(ctx, repo)
	if !errors.Is(err, gogit.ErrExactSHA1NotSupported) {
		// Refused before anything was fetched: that was no clone.
		f.clones.Add(1)
	}
	if err != nil {
		return err
	}
	hash := plumbing.NewHash(rev.Commit)
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return errCommitMissing
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.Checkout(&gogit.CheckoutOptions{Hash: commit.Hash, Force: true}); err != nil {
		return fmt.Errorf("checking out %s: %w", rev, err)
	}
	return nil
}

// fetchShallow fetches one refspec, one commit deep, without tags.
func (f *Fetcher) fetchShallow(ctx context.Context, repo *gogit.Repository, url string, spec config.RefSpec, auth *Auth) error {
	defer source.Request(source.KindGitFetch, url)()
	remote, err := repo.CreateRemote(&config.RemoteConfig{Name: gogit.DefaultRemoteName, URLs: []string{url}})
	if err != nil {
		return err
	}
	return remote.FetchContext(ctx, &gogit.FetchOptions{
		RefSpecs: []config.RefSpec{spec},
		Auth:     auth.Method(),
		CABundle: auth.CABundle(),
		Depth:    1,
		Tags:     gogit.NoTags,
	})
}

// fetchAll fetches every branch and tag: the commit may be on any of them.
func (f *Fetcher) fetchAll(ctx context.Context, repo *gogit.Repository, url string, auth *Auth) error {
	defer source.Request(source.KindGitFetch, url)()
	remote, err := repo.CreateRemote(&config.RemoteConfig{Name: gogit.DefaultRemoteName, URLs: []string{url}})
	if err != nil {
		return err
	}
	return remote.FetchContext(ctx, &gogit.FetchOptions{
		RefSpecs: []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"},
		Auth:     auth.Method(),
		CABundle: auth.CABundle(),
		Tags:     gogit.NoTags,
	})
}

// refSpec fetches ref (a full reference name, or HEAD) into itself.
func refSpec(ref string) config.RefSpec {
	if ref == "HEAD" {
		return "+HEAD:refs/heads/stackpilot-head"
	}
	return config.RefSpec("+" + ref + ":" + ref)
}

func refLabel(rev Revision) string {
	if rev.Ref == "" {
		return "commit " + rev.Commit
	}
	return fmt.Sprintf("%s (commit %s)", rev.Ref, rev.Commit)
}
