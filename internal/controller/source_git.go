package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// GitSource resolves Git revisions with ls-remote, shared by every Stack that
// follows the same (url, ref, credentials), and fetches each new revision once
// into the content-addressed artifact cache.
type GitSource struct {
	Resolver *git.Resolver
	Fetcher  *git.Fetcher
	Store    *artifact.Store
}

// NewGitSource returns a GitSource over store whose clones fetch, and check
// out, at most maxSize bytes each and check out at most maxFiles files (0:
// the defaults).
func NewGitSource(store *artifact.Store, maxSize int64, maxFiles int) *GitSource {
	f := git.NewFetcher()
	if maxSize > 0 {
		f.MaxSize = maxSize
	}
	if maxFiles > 0 {
		f.MaxFiles = maxFiles
	}
	return &GitSource{Resolver: git.NewResolver(), Fetcher: f, Store: store}
}

// resolveGit resolves spec.source.git's ref with a shared ls-remote.
func (r *StackReconciler) resolveGit(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	g := stack.Spec.Source.Git
	auth, err := r.gitAuth(ctx, stack)
	if err != nil {
		return err
	}
	rev, err := r.Source.Resolver.Resolve(ctx, g.URL, gitRef(g.Ref), auth, r.sourceMaxAge(stack), requestedResolve(stack)...)
	if err != nil {
		return sourceError(err, v1alpha1.GitOperationFailedReason)
	}
	st.revision = rev.String()
	st.fetch = func(ctx context.Context) (artifact.Artifact, error) {
		art, err := r.Source.Fetcher.Fetch(ctx, g.URL, rev, auth, r.Artifacts)
		if err != nil {
			return artifact.Artifact{}, gitFetchError(err, st.revision)
		}
		return art, nil
	}
	return nil
}

// gitFetchError: a revision over the bounds is wrong for itself alone (a new
// commit can fix it, retrying cannot), so it stalls until the next one; the
// rest is the source's typed errors.
func gitFetchError(err error, revision string) error {
	var limit *git.LimitError
	var limits *artifact.LimitError
	if errors.As(err, &limit) || errors.As(err, &limits) {
		return stallingAt(revision, v1alpha1.ArtifactFailedReason,
			"%v: nothing of it was applied; make the repository (or the revision) smaller, or raise the controller flag %s (checked again at the next revision, or every spec.interval)",
			err, limitFlag(err))
	}
	return sourceError(err, v1alpha1.GitOperationFailedReason)
}

// gitFetchRevision fetches a revision recorded in status again (for destroy
// when the cache lost it).
func (r *StackReconciler) gitFetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error) {
	auth, err := r.gitAuth(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and the Git credentials are unusable: %w", revision, err)
	}
	rev, err := git.ParseRevision(revision)
	if err == nil {
		var art artifact.Artifact
		art, err = r.Source.Fetcher.Fetch(ctx, stack.Spec.Source.Git.URL, rev, auth, r.Source.Store)
		if err == nil {
			return art, nil
		}
	}
	return artifact.Artifact{}, fmt.Errorf("the program of revision %s is neither cached nor fetchable: %w", revision, err)
}

// gitAuth reads the credentials Secret named by spec.source.git.secretRef.
func (r *StackReconciler) gitAuth(ctx context.Context, stack *v1alpha1.Stack) (*git.Auth, error) {
	g := stack.Spec.Source.Git
	if g.SecretRef == nil {
		return git.NewAuth(g.URL, nil)
	}
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: g.SecretRef.Name}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, waiting(v1alpha1.AuthenticationFailedReason, "spec.source.git.secretRef: Secret %s not found", g.SecretRef.Name)
	}
	if err != nil {
		return nil, transient(v1alpha1.AuthenticationFailedReason, fmt.Errorf("read Secret %s: %w", g.SecretRef.Name, err))
	}
	auth, err := git.NewAuth(g.URL, sec.Data)
	if err != nil {
		return nil, stalling(v1alpha1.AuthenticationFailedReason, "spec.source.git.secretRef (Secret %s): %v", g.SecretRef.Name, err)
	}
	return auth, nil
}

// requestStampWindow is how old a reconcile-now time may be and still be
// trusted as "when it was asked": an old or hand-written time would let a
// listing from before the request serve it, so it skips the cache instead.
const requestStampWindow = 10 * time.Minute

// requestedResolve is how a reconcile-now request resolves: a request
// stamped with a recent time (a Receiver's, or `kubectl annotate
// ...=$(date -u +%FT%T.%NZ)`) takes any listing made since then, so the many
// Stacks one push asks to reconcile share one ls-remote; any other value
// skips the cache.
func requestedResolve(stack *v1alpha1.Stack) []git.ResolveOption {
	if !isRequested(stack) {
		return nil
	}
	if t, ok := requestStamp(stack); ok {
		return []git.ResolveOption{git.FetchedAfter(t)}
	}
	return []git.ResolveOption{git.Force()}
}

// requestStamp is the time of the reconcile-now request, when its value is
// an RFC 3339 time within requestStampWindow.
func requestStamp(stack *v1alpha1.Stack) (time.Time, bool) {
	v, _ := requestedAt(stack)
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || time.Since(t) >= requestStampWindow {
		return time.Time{}, false
	}
	return t, true
}

func gitRef(ref *v1alpha1.GitRef) git.Ref {
	if ref == nil {
		return git.Ref{}
	}
	return git.Ref{Branch: ref.Branch, Tag: ref.Tag, SemVer: ref.SemVer, Commit: ref.Commit}
}
