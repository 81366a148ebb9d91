package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

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

	flight source.FlightGroup[artifact.Artifact]
	clones atomic.Int64
}

// DefaultFetchTimeout bounds one fetch.
const DefaultFetchTimeout = 10 * time.Minute

// NewFetcher returns a Fetcher.
func NewFetcher() *Fetcher { return &Fetcher{Timeout: DefaultFetchTimeout} }

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
// it clones: shallowly, just rev.Ref, when the revision names one, and
// fully when it does not or when the reference has moved on since it was
// resolved (then the commit is checked out from the full history). The
// checked-out commit is verified to be rev.Commit.
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
// it; the caller removes it, also on error.
func (f *Fetcher) checkout(ctx context.Context, url string, rev Revision, auth *Auth, store *artifact.Store) (string, error) {
	if rev.Ref != "" {
		dir, err := store.TempDir("clone-")
		if err != nil {
			return "", err
		}
		head, err := f.shallowClone(ctx, dir, url, rev.Ref, auth)
		switch {
		case err == nil && head == rev.Commit:
			return dir, nil
		case err != nil && !isRefNotFound(err):
			return dir, classify(err, "clone", url, refLabel(rev), auth)
		}
		// The reference moved (or vanished) since it was resolved: the
		// commit may still be in the history. Start again, in full.
		os.RemoveAll(dir)
	}
	dir, err := store.TempDir("clone-")
	if err != nil {
		return "", err
	}
	return dir, f.fullClone(ctx, dir, url, rev, auth)
}

func (f *Fetcher) shallowClone(ctx context.Context, dir, url, ref string, auth *Auth) (string, error) {
	f.clones.Add(1)
	defer source.Request(source.KindGitFetch, url)()
	opts := &gogit.CloneOptions{
		URL:          url,
		Auth:         auth.Method(),
		CABundle:     auth.CABundle(),
		Depth:        1,
		SingleBranch: true,
		Tags:         gogit.NoTags,
	}
	if ref != "HEAD" {
		opts.ReferenceName = plumbing.ReferenceName(ref)
	}
	repo, err := gogit.PlainCloneContext(ctx, dir, false, opts)
	if err != nil {
		return "", err
	}
	return headCommit(repo)
}

// fullClone fetches every branch and tag, then checks out rev.Commit.
func (f *Fetcher) fullClone(ctx context.Context, dir, url string, rev Revision, auth *Auth) error {
	f.clones.Add(1)
	defer source.Request(source.KindGitFetch, url)()
	repo, err := gogit.PlainCloneContext(ctx, dir, false, &gogit.CloneOptions{
		URL:        url,
		Auth:       auth.Method(),
		CABundle:   auth.CABundle(),
		NoCheckout: true,
		Tags:       gogit.AllTags,
	})
	if err != nil {
		return classify(err, "clone", url, refLabel(rev), auth)
	}
	notFound := &source.NotFoundError{URL: source.RedactURL(url), Ref: "commit " + rev.Commit}
	hash := plumbing.NewHash(rev.Commit)
	if _, err := repo.CommitObject(hash); err != nil {
		return notFound
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.Checkout(&gogit.CheckoutOptions{Hash: hash, Force: true}); err != nil {
		return fmt.Errorf("checking out %s: %w", rev, err)
	}
	head, err := headCommit(repo)
	if err != nil {
		return err
	}
	if head != rev.Commit {
		return notFound
	}
	return nil
}

// headCommit returns the commit HEAD resolves to, peeling an annotated
// tag if HEAD points at one (as after cloning a tag).
func headCommit(repo *gogit.Repository) (string, error) {
	head, err := repo.Head()
	if err != nil {
		return "", err
	}
	hash := head.Hash()
	if tag, err := repo.TagObject(hash); err == nil {
		c, err := tag.Commit()
		if err != nil {
			return "", err
		}
		return c.Hash.String(), nil
	}
	return hash.String(), nil
}

func isRefNotFound(err error) bool {
	return errors.Is(err, plumbing.ErrReferenceNotFound) || errors.Is(err, gogit.NoMatchingRefSpecError{})
}

func refLabel(rev Revision) string {
	if rev.Ref == "" {
		return "commit " + rev.Commit
	}
	return fmt.Sprintf("%s (commit %s)", rev.Ref, rev.Commit)
}
