package git

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/serror"
	"github.com/stackpilot/stackpilot/internal/source"
)

// Kind is spec.source.git: it resolves revisions with ls-remote, shared by
// every Stack that follows the same (url, ref, credentials), and fetches
// each new revision once into the content-addressed artifact cache.
type Kind struct {
	// Reader reads the credentials Secrets (the API server, not a cache).
	Reader   client.Reader
	Resolver *Resolver
	Fetcher  *Fetcher
	Store    *artifact.Store
}

var _ source.Kind = (*Kind)(nil)

// NewKind returns a Kind over store whose clones fetch, and check out, at
// most maxSize bytes each and check out at most maxFiles files (0: the
// defaults).
func NewKind(reader client.Reader, store *artifact.Store, maxSize int64, maxFiles int) *Kind {
	f := NewFetcher()
	if maxSize > 0 {
		f.MaxSize = maxSize
	}
	if maxFiles > 0 {
		f.MaxFiles = maxFiles
	}
	return &Kind{Reader: reader, Resolver: NewResolver(), Fetcher: f, Store: store}
}

// Selected is true for spec.source.git.
func (k *Kind) Selected(stack *v1alpha1.Stack) bool { return stack.Spec.Source.Git != nil }

// Resolve resolves spec.source.git's ref with a shared ls-remote.
func (k *Kind) Resolve(ctx context.Context, stack *v1alpha1.Stack, req source.ResolveRequest) (source.Resolved, error) {
	g := stack.Spec.Source.Git
	auth, err := k.auth(ctx, stack)
	if err != nil {
		return source.Resolved{}, err
	}
	rev, err := k.Resolver.Resolve(ctx, g.URL, SpecRef(g.Ref), auth, req.MaxAge, requestedResolve(req)...)
	if err != nil {
		return source.Resolved{}, source.Failure(err, v1alpha1.GitOperationFailedReason)
	}
	revision := rev.String()
	return source.Resolved{Revision: revision, Fetch: func(ctx context.Context) (artifact.Artifact, error) {
		art, err := k.Fetcher.Fetch(ctx, g.URL, rev, auth, k.Store)
		if err != nil {
			return artifact.Artifact{}, fetchError(err, revision)
		}
		return art, nil
	}}, nil
}

// fetchError: a revision over the bounds is wrong for itself alone (a new
// commit can fix it, retrying cannot), so it stalls until the next one; the
// rest is the source's typed errors.
func fetchError(err error, revision string) error {
	var limit *LimitError
	var limits *artifact.LimitError
	if errors.As(err, &limit) || errors.As(err, &limits) {
		return serror.StallingAt(revision, v1alpha1.ArtifactFailedReason,
			"%v: nothing of it was applied; make the repository (or the revision) smaller, or raise the controller flag %s (checked again at the next revision, or every spec.interval)",
			err, limitFlag(err))
	}
	return source.Failure(err, v1alpha1.GitOperationFailedReason)
}

// limitFlag names the controller flag of the bound err reports: a clone's
// file count is --artifact-max-files, as the cache's is.
func limitFlag(err error) string {
	var gl *LimitError
	if errors.As(err, &gl) && gl.What == "file count" {
		return "--artifact-max-files"
	}
	return source.LimitFlag(err)
}

// FetchRevision fetches a revision recorded in status again (for destroy
// when the cache lost it).
func (k *Kind) FetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error) {
	auth, err := k.auth(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and the Git credentials are unusable: %w", revision, err)
	}
	rev, err := ParseRevision(revision)
	if err == nil {
		var art artifact.Artifact
		art, err = k.Fetcher.Fetch(ctx, stack.Spec.Source.Git.URL, rev, auth, k.Store)
		if err == nil {
			return art, nil
		}
	}
	return artifact.Artifact{}, fmt.Errorf("the program of revision %s is neither cached nor fetchable: %w", revision, err)
}

// auth reads the credentials Secret named by spec.source.git.secretRef.
func (k *Kind) auth(ctx context.Context, stack *v1alpha1.Stack) (*Auth, error) {
	g := stack.Spec.Source.Git
	if g.SecretRef == nil {
		return NewAuth(g.URL, nil)
	}
	var sec corev1.Secret
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: g.SecretRef.Name}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, serror.Waiting(v1alpha1.AuthenticationFailedReason, "spec.source.git.secretRef: Secret %s not found", g.SecretRef.Name)
	}
	if err != nil {
		return nil, serror.Transient(v1alpha1.AuthenticationFailedReason, fmt.Errorf("read Secret %s: %w", g.SecretRef.Name, err))
	}
	auth, err := NewAuth(g.URL, sec.Data)
	if err != nil {
		return nil, serror.Stalling(v1alpha1.AuthenticationFailedReason, "spec.source.git.secretRef (Secret %s): %v", g.SecretRef.Name, err)
	}
	return auth, nil
}

// Secrets is the credentials Secret, when there is one.
func (k *Kind) Secrets(stack *v1alpha1.Stack) []string {
	if g := stack.Spec.Source.Git; g != nil && g.SecretRef != nil {
		return []string{g.SecretRef.Name}
	}
	return nil
}

// Watch adds nothing: a Git source is polled at spec.interval, and a
// Receiver's push event asks for a reconcile.
func (k *Kind) Watch(_ context.Context, _ ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	return b, nil
}

// Hints: a program is missing until it is committed.
func (k *Kind) Hints() source.Hints {
	return source.Hints{AddFolder: "commit the folder", Publish: "commit"}
}

// requestedResolve is how a reconcile-now request resolves: a request
// stamped with a recent time (a Receiver's, or `kubectl annotate
// ...=$(date -u +%FT%T.%NZ)`) takes any listing made since then, so the many
// Stacks one push asks to reconcile share one ls-remote; any other value
// skips the cache.
func requestedResolve(req source.ResolveRequest) []ResolveOption {
	if !req.Requested {
		return nil
	}
	if !req.RequestedAt.IsZero() {
		return []ResolveOption{FetchedAfter(req.RequestedAt)}
	}
	return []ResolveOption{Force()}
}

// SpecRef is the resolver's Ref for spec.source.git.ref.
func SpecRef(ref *v1alpha1.GitRef) Ref {
	if ref == nil {
		return Ref{}
	}
	return Ref{Branch: ref.Branch, Tag: ref.Tag, SemVer: ref.SemVer, Commit: ref.Commit}
}

// FetchPullRequest fetches the head commit of a pull request through ref,
// the reference of the Stack's repository that holds it
// (refs/pull/N/head, refs/merge-requests/N/head), with the Stack's
// credentials and the same bounds as any revision.
func (k *Kind) FetchPullRequest(ctx context.Context, stack *v1alpha1.Stack, ref, commit string) (artifact.Artifact, error) {
	auth, err := k.auth(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, err
	}
	art, err := k.Fetcher.Fetch(ctx, stack.Spec.Source.Git.URL, Revision{Ref: ref, Commit: commit}, auth, k.Store)
	if err != nil {
		return artifact.Artifact{}, fetchError(err, ref+"@sha1:"+commit)
	}
	return art, nil
}
