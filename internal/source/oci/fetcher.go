package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/source"
)

const (
	// DefaultMaxSize bounds an artifact's chosen layer (--artifact-max-size).
	DefaultMaxSize = 100 << 20
	// DefaultFetchTimeout bounds one verification and download.
	DefaultFetchTimeout = 10 * time.Minute
)

// Verifier checks an artifact's signatures before anything of it is read.
type Verifier interface {
	// Verify returns nil when a signature of repository@digest verifies, a
	// *VerificationError when none does (Ref may be left empty), and any
	// other error when the signatures could not be read.
	Verify(ctx context.Context, repository, digest string, client *ocilib.Client) error
	// ID fingerprints what is trusted (the keys): a verification recorded
	// under one ID does not count for another.
	ID() string
}

// VerificationError reports an artifact whose signature did not verify;
// nothing of it was extracted or cached.
type VerificationError struct {
	Ref string // oci://host/repo:tag@sha256:…
	Err error
}

func (e *VerificationError) Error() string {
	return fmt.Sprintf("verification of %s failed: %v", e.Ref, e.Err)
}

func (e *VerificationError) Unwrap() error { return e.Err }

// FetchOptions say what to take from an artifact and what to trust.
type FetchOptions struct {
	// LayerMediaType chooses the layer; empty is Flux's content layer.
	LayerMediaType string
	// Verifier, when set, must accept the artifact before it is pulled, or
	// used from the cache.
	Verifier Verifier
}

// Fetcher pulls artifacts into the artifact store, once per (repository,
// digest, layer type, credentials): a digest names immutable content, so an
// artifact fetched before is served from the store, but only to a fetch with
// the same credentials. Knowing a digest is no proof of being allowed to read
// it: a fetch with other credentials, or none, asks the registry. A Fetcher
// is safe for concurrent use; concurrent fetches of one artifact with the
// same credentials share one download.
type Fetcher struct {
	// MaxSize bounds the chosen layer, checked against the manifest before
	// download and while reading.
	MaxSize int64
	Timeout time.Duration

	flight source.FlightGroup[artifact.Artifact]
	pulls  atomic.Int64
}

// NewFetcher returns a Fetcher with the default bounds.
func NewFetcher() *Fetcher { return &Fetcher{MaxSize: DefaultMaxSize, Timeout: DefaultFetchTimeout} }

// Pulls returns how many artifacts the Fetcher downloaded.
func (f *Fetcher) Pulls() int64 { return f.pulls.Load() }

// IndexKey is the store index key of an artifact's tree as fetched through
// client. The credentials' fingerprint is part of it (as Git's fetcher keys
// by its Secret), so a tree one tenant's Secret pulled is never served to a
// Stack that only knows its digest; the content itself is stored once.
func IndexKey(repository, digest, layerMediaType string, client *ocilib.Client) string {
	return "oci\x00" + repository + "@" + digest + "\x00" + layerMediaType + "\x00" + credentialID(client)
}

// credentialID fingerprints the credentials a client sends ("" for none).
func credentialID(client *ocilib.Client) string {
	if client == nil || client.Credentials == nil {
		return ""
	}
	return client.Credentials.ID()
}

func verifiedKey(repository, digest, verifierID string) string {
	return "oci-verified\x00" + repository + "@" + digest + "\x00" + verifierID
}

// Fetch returns the tree of the artifact rev names, verifying it first when
// opts.Verifier is set. Errors: *VerificationError, the source package's
// *AuthError and *NotFoundError, internal/oci's *LimitError and *DigestError,
// artifact's *UnsafePathError (an entry that would escape the tree), and
// *source.TransientError for the rest.
func (f *Fetcher) Fetch(ctx context.Context, repository string, rev Revision, client *ocilib.Client, opts FetchOptions, store *artifact.Store) (artifact.Artifact, error) {
	if opts.Verifier != nil {
		if err := f.verify(ctx, repository, rev, client, opts.Verifier, store); err != nil {
			return artifact.Artifact{}, err
		}
	}
	key := IndexKey(repository, rev.Digest, opts.LayerMediaType, client)
	return source.FetchOnce(ctx, &f.flight, store, key, f.Timeout, func(ctx context.Context) (artifact.Artifact, error) {
		return f.pull(ctx, repository, rev, client, opts, store, key)
	})
}

// verify runs the Verifier unless it accepted this digest with the same
// trusted keys before (recorded in the store's index).
func (f *Fetcher) verify(ctx context.Context, repository string, rev Revision, client *ocilib.Client, v Verifier, store *artifact.Store) error {
	vkey := verifiedKey(repository, rev.Digest, v.ID())
	if _, ok := store.Lookup(vkey); ok {
		return nil
	}
	done := source.Request(source.KindOCIVerify, repository)
	err := v.Verify(ctx, repository, rev.Digest, client)
	done()
	if err != nil {
		var ve *VerificationError
		if !errors.As(err, &ve) {
			// The signatures could not be read: a registry error, not a verdict.
			return classify(err, repository, Ref{Digest: rev.Digest})
		}
		if ve.Ref == "" {
			ve = &VerificationError{Ref: RefString(repository, rev), Err: ve.Err}
		}
		return ve
	}
	return store.Link(vkey, rev.Digest)
}

func (f *Fetcher) pull(ctx context.Context, repository string, rev Revision, client *ocilib.Client, opts FetchOptions, store *artifact.Store, key string) (artifact.Artifact, error) {
	staging, err := store.TempDir("oci-")
	if err != nil {
		return artifact.Artifact{}, err
	}
	defer os.RemoveAll(staging)
	tree := filepath.Join(staging, "tree")
	f.pulls.Add(1)
	done := source.Request(source.KindOCIPull, repository)
	ref := ocilib.Reference{Repository: repository, Digest: rev.Digest}
	_, err = client.Pull(ctx, ref, tree, ocilib.PullOptions{MaxSize: f.MaxSize, MaxExtractedSize: f.MaxSize, LayerMediaType: opts.LayerMediaType})
	done()
	if err != nil {
		return artifact.Artifact{}, pullError(err, repository, rev)
	}
	a, err := store.Put(ctx, tree)
	if err != nil {
		return artifact.Artifact{}, err
	}
	if err := store.Link(key, a.Digest); err != nil {
		return artifact.Artifact{}, err
	}
	return a, nil
}

// pullError keeps the errors that say what is wrong with the artifact as
// they are and classifies registry errors like Resolve does.
func pullError(err error, repository string, rev Revision) error {
	var limit *ocilib.LimitError
	var digest *ocilib.DigestError
	var unsafe *artifact.UnsafePathError
	var limits *artifact.LimitError
	switch {
	case errors.As(err, &limit), errors.As(err, &digest), errors.As(err, &unsafe), errors.As(err, &limits):
		return fmt.Errorf("artifact %s: %w", RefString(repository, rev), err)
	}
	return classify(err, repository, Ref{Digest: rev.Digest})
}
