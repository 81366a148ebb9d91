package git

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/stackpilot/stackpilot/internal/source"
)

const (
	// DefaultRetention is how long a Resolver keeps a listing.
	DefaultRetention = time.Hour
	// DefaultListTimeout bounds one ls-remote.
	DefaultListTimeout = time.Minute
)

// Resolver turns references into commits with ls-remote, never a clone,
// and shares the answers: many Stacks that follow the same repository with
// the same credentials cost one request per interval between them.
//
// What is cached is the repository's whole listing (branches, tags, HEAD)
// per (URL, credentials), not one answer per reference: Stacks that follow
// different branches or tags of one repository share the request too, and
// a semver constraint needs every tag anyway. Credentials are part of the
// key so that an answer obtained with one Secret never serves a Stack that
// uses another (or none). Errors are not cached.
//
// A Resolver is safe for concurrent use.
type Resolver struct {
	// Retention bounds how long a listing stays in memory after it was
	// fetched; a listing older than a caller's maxAge is refreshed anyway.
	Retention time.Duration
	// Timeout bounds each request, whatever the callers' contexts say: a
	// request is shared, and one hung server must not hold every Stack
	// that follows it.
	Timeout time.Duration

	mu       sync.Mutex
	cache    map[string]*remoteRefs
	flight   source.FlightGroup[*remoteRefs]
	requests atomic.Int64
	now      func() time.Time // for tests
}

// NewResolver returns an empty Resolver.
func NewResolver() *Resolver {
	return &Resolver{Retention: DefaultRetention, Timeout: DefaultListTimeout, cache: map[string]*remoteRefs{}, now: time.Now}
}

// ResolveOption changes one Resolve call.
type ResolveOption func(*resolveOptions)

type resolveOptions struct {
	force bool
	after time.Time
}

// Force skips the cache: the answer comes from a request made now (shared
// with other forced callers) and refreshes the cache. Use it when a user
// asked for a reconcile now.
func Force() ResolveOption { return func(o *resolveOptions) { o.force = true } }

// FetchedAfter accepts only a listing whose request started at t or later,
// and shares that request with every caller that asks so: when a webhook
// asks a hundred Stacks on one repository to reconcile at t, the first
// resolve lists the references and the other 99 reuse its answer, where
// Force would have each make its own request. A t in the future (a clock
// ahead of ours) is Force.
func FetchedAfter(t time.Time) ResolveOption { return func(o *resolveOptions) { o.after = t } }

// CacheKey is the key the Resolver caches url's listing under for these
// credentials; pass it to Forget.
func CacheKey(url string, auth *Auth) string {
	return url + "\x00" + auth.Digest()
}

// Forget drops the cached listing for key, so the next Resolve asks the
// server.
func (r *Resolver) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, key)
}

// Invalidate drops every cached listing of the repository at url, whatever
// the credentials, comparing URLs as NormalizeURL does (https, ssh and
// ".git" forms are one repository); the next Resolve asks the server. A
// webhook calls it when the repository was pushed to. It returns how many
// listings were dropped.
func (r *Resolver) Invalidate(url string) int {
	want := NormalizeURL(url)
	if want == "" {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for key := range r.cache {
		u, _, _ := strings.Cut(key, "\x00")
		if NormalizeURL(u) == want {
			delete(r.cache, key)
			n++
		}
	}
	return n
}

// Requests returns how many times the Resolver has asked a server for its
// references.
func (r *Resolver) Requests() int64 { return r.requests.Load() }

// Resolve returns the commit ref names in the repository at url. A listing
// fetched less than maxAge ago is reused; concurrent callers for the same
// (url, credentials) share one request. A commit pin is returned as it is,
// without a request: Fetch verifies it exists when it clones.
//
// Errors are *source.AuthError, *source.NotFoundError (naming the ref and
// the URL), *source.TransientError or *source.InvalidSpecError.
func (r *Resolver) Resolve(ctx context.Context, url string, ref Ref, auth *Auth, maxAge time.Duration, opts ...ResolveOption) (Revision, error) {
	var o resolveOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := validateRef(ref); err != nil {
		return Revision{}, err
	}
	if ref.Commit != "" {
		return pinned(ref), nil
	}
	refs, err := r.listing(ctx, url, auth, maxAge, o)
	if err != nil {
		return Revision{}, classify(err, "list references of", url, ref.String(), auth)
	}
	rev, ok := pick(refs, ref)
	if !ok {
		return Revision{}, &source.NotFoundError{URL: source.RedactURL(url), Ref: ref.String()}
	}
	return rev, nil
}

func validateRef(ref Ref) error {
	if ref.Commit != "" && !validCommit(ref.Commit) {
		return &source.InvalidSpecError{Field: "ref.commit", Value: ref.Commit, Reason: "want a full commit hash (40 or 64 lower-case hex digits)"}
	}
	if ref.SemVer != "" {
		if _, err := semver.NewConstraint(ref.SemVer); err != nil {
			return &source.InvalidSpecError{Field: "ref.semver", Value: ref.SemVer, Reason: err.Error()}
		}
	}
	return nil
}

func pinned(ref Ref) Revision {
	rev := Revision{Commit: ref.Commit}
	switch {
	case ref.Branch != "":
		rev.Name, rev.Ref = ref.Branch, plumbing.NewBranchReferenceName(ref.Branch).String()
	case ref.Tag != "":
		rev.Name, rev.Ref = ref.Tag, plumbing.NewTagReferenceName(ref.Tag).String()
	}
	return rev
}

// listing returns the cached listing for (url, auth) if fresh enough, or
// fetches it, sharing the request with concurrent callers.
func (r *Resolver) listing(ctx context.Context, url string, auth *Auth, maxAge time.Duration, o resolveOptions) (*remoteRefs, error) {
	key := CacheKey(url, auth)
	force := o.force
	if !o.after.IsZero() && !force {
		if o.after.After(r.now()) {
			force = true
		} else {
			return r.listingAfter(ctx, url, auth, key, o.after)
		}
	}
	if !force {
		if refs, ok := r.fresh(key, maxAge); ok {
			return refs, nil
		}
	}
	// Forced calls share among themselves only: joining an unforced call
	// could hand back a listing as old as that caller's maxAge.
	flightKey := key
	if force {
		flightKey += "\x00force"
	}
	return r.flight.Do(ctx, flightKey, func(ctx context.Context) (*remoteRefs, error) {
		// A call that finished between our cache check and now has
		// already done the work.
		if !force {
			if refs, ok := r.fresh(key, maxAge); ok {
				return refs, nil
			}
		}
		return r.request(ctx, url, auth, key)
	})
}

// listingAfter returns a listing whose request started at after or later,
// sharing one request among the callers that want one.
func (r *Resolver) listingAfter(ctx context.Context, url string, auth *Auth, key string, after time.Time) (*remoteRefs, error) {
	for attempt := 0; ; attempt++ {
		if refs, ok := r.startedSince(key, after); ok {
			return refs, nil
		}
		refs, err := r.flight.Do(ctx, key+"\x00after", func(ctx context.Context) (*remoteRefs, error) {
			if refs, ok := r.startedSince(key, after); ok {
				return refs, nil
			}
			return r.request(ctx, url, auth, key)
		})
		// A request joined before after was asked for is too old: one more,
		// which then starts after it.
		if err != nil || !refs.started.Before(after) || attempt > 0 {
			return refs, err
		}
	}
}

// request lists the references now and caches the answer.
func (r *Resolver) request(ctx context.Context, url string, auth *Auth, key string) (*remoteRefs, error) {
	r.requests.Add(1)
	started := r.now()
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	refs, err := listRefs(ctx, url, auth)
	if err != nil {
		return nil, err
	}
	refs.started = started
	r.remember(key, refs)
	return refs, nil
}

func (r *Resolver) startedSince(key string, after time.Time) (*remoteRefs, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	refs, ok := r.cache[key]
	if !ok || refs.started.Before(after) {
		return nil, false
	}
	return refs, true
}

func (r *Resolver) fresh(key string, maxAge time.Duration) (*remoteRefs, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	refs, ok := r.cache[key]
	if !ok || r.now().Sub(refs.fetched) >= maxAge {
		return nil, false
	}
	return refs, true
}

// remember stores a listing and drops those past Retention, so credentials
// rotated away and repositories no longer followed do not pile up.
func (r *Resolver) remember(key string, refs *remoteRefs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	refs.fetched = now
	for k, old := range r.cache {
		if now.Sub(old.fetched) > r.Retention {
			delete(r.cache, k)
		}
	}
	r.cache[key] = refs
}

// pick finds ref in a listing.
func pick(refs *remoteRefs, ref Ref) (Revision, bool) {
	switch {
	case ref.SemVer != "":
		return pickSemVer(refs, ref.SemVer)
	case ref.Tag != "":
		return lookup(refs, plumbing.NewTagReferenceName(ref.Tag).String())
	case ref.Branch != "":
		return lookup(refs, plumbing.NewBranchReferenceName(ref.Branch).String())
	}
	if refs.head == "" {
		if refs.headCommit == "" {
			return Revision{}, false
		}
		return Revision{Name: "HEAD", Commit: refs.headCommit}, true
	}
	return lookup(refs, refs.head)
}

func lookup(refs *remoteRefs, name string) (Revision, bool) {
	commit, ok := refs.refs[name]
	if !ok {
		return Revision{}, false
	}
	return Revision{Name: shortName(name), Ref: name, Commit: commit}, true
}

// pickSemVer returns the highest tag satisfying the constraint. Tags that
// are not versions are ignored; "v1.0.0" and "1.0.0" are the same version,
// and then the name sorting last wins, so the choice is stable.
func pickSemVer(refs *remoteRefs, constraint string) (Revision, bool) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return Revision{}, false // validated before; unreachable
	}
	type candidate struct {
		name string
		v    *semver.Version
	}
	var found []candidate
	for name := range refs.refs {
		tag, ok := strings.CutPrefix(name, "refs/tags/")
		if !ok {
			continue
		}
		v, err := semver.NewVersion(tag)
		if err != nil || !c.Check(v) {
			continue
		}
		found = append(found, candidate{name, v})
	}
	if len(found) == 0 {
		return Revision{}, false
	}
	sort.Slice(found, func(i, j int) bool {
		if cmp := found[i].v.Compare(found[j].v); cmp != 0 {
			return cmp > 0
		}
		return found[i].name > found[j].name
	})
	return lookup(refs, found[0].name)
}
