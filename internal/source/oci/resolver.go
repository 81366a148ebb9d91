package oci

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Masterminds/semver/v3"

	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/source"
)

const (
	// DefaultRetention is how long a Resolver keeps an answer.
	DefaultRetention = time.Hour
	// DefaultTimeout bounds one lookup (a HEAD, or a tag listing and a HEAD).
	DefaultTimeout = time.Minute
)

// Resolver turns (repository, ref) into a manifest digest and shares the
// answer: any number of Stacks that follow the same tag or semver range of a
// repository with the same credentials cost one lookup per interval between
// them. A tag costs one HEAD; a semver range a tag listing and a HEAD of the
// highest match; a digest pin nothing here: the fetch, whose cache is
// keyed by credentials too, reads its manifest, so knowing a digest never
// stands in for being allowed to read it.
//
// Credentials (their fingerprint) and the plain-HTTP setting are part of the
// key, so an answer obtained with one Secret never serves a Stack that uses
// another or none. Errors are not cached. A Resolver is safe for concurrent
// use.
type Resolver struct {
	// Retention bounds how long an answer stays in memory; an answer older
	// than a caller's maxAge is refreshed anyway.
	Retention time.Duration
	// Timeout bounds each lookup whatever the callers' contexts say: a
	// lookup is shared, and one hung registry must not hold every Stack.
	Timeout time.Duration

	mu       sync.Mutex
	cache    map[string]answer
	flight   source.FlightGroup[Revision]
	requests atomic.Int64
	now      func() time.Time
}

type answer struct {
	rev     Revision
	fetched time.Time
}

// NewResolver returns an empty Resolver.
func NewResolver() *Resolver {
	return &Resolver{Retention: DefaultRetention, Timeout: DefaultTimeout, cache: map[string]answer{}, now: time.Now}
}

// ResolveOption changes one Resolve call.
type ResolveOption func(*resolveOptions)

type resolveOptions struct{ force bool }

// Force skips the cache (a user asked for a reconcile now); the answer
// refreshes it.
func Force() ResolveOption { return func(o *resolveOptions) { o.force = true } }

// Lookups returns how many lookups the Resolver made against registries.
func (r *Resolver) Lookups() int64 { return r.requests.Load() }

// CacheKey is the key an answer for (repository, ref) through client is kept under.
func CacheKey(repository string, ref Ref, client *ocilib.Client) string {
	var id string
	if client.Credentials != nil {
		id = client.Credentials.ID()
	}
	return repository + "\x00" + ref.String() + "\x00" + id + "\x00" + strconv.FormatBool(client.Insecure)
}

// Forget drops every cached answer for repository, so the next Resolve asks
// the registry (a push notification says it changed).
func (r *Resolver) Forget(repository string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.cache {
		if len(k) > len(repository) && k[:len(repository)] == repository && k[len(repository)] == 0 {
			delete(r.cache, k)
		}
	}
}

// Resolve returns the artifact ref points at in repository ("host/path").
// An answer younger than maxAge is reused; concurrent callers with the same
// key share one lookup.
//
// Errors are *source.AuthError, *source.NotFoundError (naming the ref),
// *source.InvalidSpecError or *source.TransientError.
func (r *Resolver) Resolve(ctx context.Context, repository string, ref Ref, client *ocilib.Client, maxAge time.Duration, opts ...ResolveOption) (Revision, error) {
	var o resolveOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := validateRef(ref); err != nil {
		return Revision{}, err
	}
	if ref.Digest != "" {
		return Revision{Digest: ref.Digest}, nil
	}
	key := CacheKey(repository, ref, client)
	if !o.force {
		if rev, ok := r.fresh(key, maxAge); ok {
			return rev, nil
		}
	}
	flightKey := key
	if o.force {
		flightKey += "\x00force"
	}
	return r.flight.Do(ctx, flightKey, func(ctx context.Context) (Revision, error) {
		if !o.force {
			if rev, ok := r.fresh(key, maxAge); ok {
				return rev, nil
			}
		}
		r.requests.Add(1)
		if r.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, r.Timeout)
			defer cancel()
		}
		done := source.Request(source.KindOCIResolve, repository)
		rev, err := lookup(ctx, repository, ref, client)
		done()
		if err != nil {
			return Revision{}, classify(err, repository, ref)
		}
		r.remember(key, rev)
		return rev, nil
	})
}

func validateRef(ref Ref) error {
	if ref.Digest != "" && !digestRE.MatchString(ref.Digest) {
		return &source.InvalidSpecError{Field: "ref.digest", Value: ref.Digest, Reason: "want sha256: and 64 lower-case hex digits"}
	}
	if ref.SemVer != "" {
		if _, err := semver.NewConstraint(ref.SemVer); err != nil {
			return &source.InvalidSpecError{Field: "ref.semver", Value: ref.SemVer, Reason: err.Error()}
		}
	}
	return nil
}

// lookup asks the registry.
func lookup(ctx context.Context, repository string, ref Ref, client *ocilib.Client) (Revision, error) {
	tag := ref.Tag
	if ref.SemVer != "" {
		tags, err := client.ListTags(ctx, repository)
		if err != nil {
			return Revision{}, err
		}
		best, ok := highest(tags, ref.SemVer)
		if !ok {
			return Revision{}, &source.NotFoundError{URL: "oci://" + repository, Ref: ref.String(), Reason: "no tag matches the range"}
		}
		tag = best
	}
	if tag == "" {
		tag = DefaultTag
	}
	digest, err := client.Digest(ctx, ocilib.Reference{Repository: repository, Tag: tag})
	if err != nil {
		return Revision{}, err
	}
	return Revision{Tag: tag, Digest: digest}, nil
}

// highest returns the highest tag satisfying the constraint. Tags that are
// not versions are ignored; "v1.0.0" and "1.0.0" are the same version, and
// then the tag sorting last wins, so the choice is stable.
func highest(tags []string, constraint string) (string, bool) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", false // validated before
	}
	type candidate struct {
		tag string
		v   *semver.Version
	}
	var found []candidate
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		found = append(found, candidate{t, v})
	}
	if len(found) == 0 {
		return "", false
	}
	sort.Slice(found, func(i, j int) bool {
		if cmp := found[i].v.Compare(found[j].v); cmp != 0 {
			return cmp > 0
		}
		return found[i].tag > found[j].tag
	})
	return found[0].tag, true
}

func (r *Resolver) fresh(key string, maxAge time.Duration) (Revision, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.cache[key]
	if !ok || r.now().Sub(a.fetched) >= maxAge {
		return Revision{}, false
	}
	return a.rev, true
}

// remember stores an answer and drops those past Retention.
func (r *Resolver) remember(key string, rev Revision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, a := range r.cache {
		if now.Sub(a.fetched) > r.Retention {
			delete(r.cache, k)
		}
	}
	r.cache[key] = answer{rev: rev, fetched: now}
}

// classify turns internal/oci's errors into the source package's, which the
// reconciler maps to conditions.
func classify(err error, repository string, ref Ref) error {
	url := "oci://" + repository
	var authErr *ocilib.AuthError
	var notFound *ocilib.NotFoundError
	var srcNotFound *source.NotFoundError
	switch {
	case errors.As(err, &srcNotFound):
		return err
	case errors.As(err, &authErr):
		return &source.AuthError{URL: url, Reason: authErr.Error(), Err: err}
	case errors.As(err, &notFound):
		return &source.NotFoundError{URL: url, Ref: ref.String(), Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &source.TransientError{URL: url, Op: "resolve " + ref.String() + " in", Reason: "the registry did not answer in time", Err: err}
	}
	return &source.TransientError{URL: url, Op: "resolve " + ref.String() + " in", Reason: err.Error(), Err: err}
}
