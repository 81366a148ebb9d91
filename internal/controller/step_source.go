package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/source"
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

// NewGitSource returns a GitSource over store.
func NewGitSource(store *artifact.Store) *GitSource {
	return &GitSource{Resolver: git.NewResolver(), Fetcher: git.NewFetcher(), Store: store}
}

// resolveSource finds the revision the Stack's ref points at now. A resolution
// younger than the Stack's shortest jittered interval (sourceMaxAge) is reused;
// a reconcile-now request forces a fresh one.
func (r *StackReconciler) resolveSource(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	g := stack.Spec.Source.Git
	if g == nil {
		return stepDone, stalling(v1alpha1.InvalidSpecReason, "spec.source.git is required: no other source kind is supported yet")
	}
	auth, err := r.gitAuth(ctx, stack)
	if err != nil {
		return stepDone, err
	}
	var opts []git.ResolveOption
	if isRequested(stack) {
		opts = append(opts, git.Force())
	}
	rev, err := r.Source.Resolver.Resolve(ctx, g.URL, gitRef(g.Ref), auth, r.sourceMaxAge(stack), opts...)
	if err != nil {
		return stepDone, sourceError(err)
	}
	st.revision = rev.String()
	st.gitRevision = rev
	st.gitAuth = auth
	return stepContinue, nil
}

// fetchArtifact makes sure the resolved revision is in the artifact cache.
func (r *StackReconciler) fetchArtifact(ctx context.Context, st *reconcileState) (stepResult, error) {
	if err := r.ensureArtifact(ctx, st); err != nil {
		return stepDone, err
	}
	return stepContinue, nil
}

// ensureArtifact fetches the resolved revision into the artifact cache (a
// lookup when any Stack fetched it before) and checks that it holds the
// program, once per reconcile.
func (r *StackReconciler) ensureArtifact(ctx context.Context, st *reconcileState) error {
	if st.artifact.Path != "" {
		return nil
	}
	g := st.stack.Spec.Source.Git
	art, err := r.Source.Fetcher.Fetch(ctx, g.URL, st.gitRevision, st.gitAuth, r.Artifacts)
	if err != nil {
		return sourceError(err)
	}
	// A program missing from this revision is Stalled for the revision alone:
	// retrying it cannot help, but the commit that adds it must be seen.
	dir := st.stack.Spec.Source.Dir
	project, err := artifact.SubdirPath(art.Path, dir)
	if err != nil {
		return stallingAt(st.revision, v1alpha1.ArtifactFailedReason,
			"spec.source.dir %q in revision %s: %v; fix spec.source.dir or commit the folder (checked again every spec.interval)", dir, st.revision, err)
	}
	if _, err := runner.ProjectName(project); err != nil {
		return stallingAt(st.revision, v1alpha1.ProgramErrorReason,
			"spec.source.dir %q in revision %s: %v; commit a Pulumi project there (checked again every spec.interval)", dir, st.revision, err)
	}
	st.artifact = art
	return nil
}

// FetchRevision fetches a revision recorded in status again (for destroy when the
// cache lost it).
func (s *GitSource) FetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string, auth *git.Auth) (artifact.Artifact, error) {
	g := stack.Spec.Source.Git
	if g == nil {
		return artifact.Artifact{}, errors.New("spec.source.git is not set")
	}
	rev, err := git.ParseRevision(revision)
	if err != nil {
		return artifact.Artifact{}, err
	}
	return s.Fetcher.Fetch(ctx, g.URL, rev, auth, s.Store)
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

func gitRef(ref *v1alpha1.GitRef) git.Ref {
	if ref == nil {
		return git.Ref{}
	}
	return git.Ref{Branch: ref.Branch, Tag: ref.Tag, SemVer: ref.SemVer, Commit: ref.Commit}
}

// sourceError turns the source package's typed errors into the reconciler's.
func sourceError(err error) error {
	var authErr *source.AuthError
	var notFound *source.NotFoundError
	switch {
	case errors.As(err, &authErr):
		return transient(v1alpha1.AuthenticationFailedReason, err)
	case errors.As(err, &notFound):
		return transient(v1alpha1.SourceNotFoundReason, err)
	case source.IsStalling(err):
		return stalling(v1alpha1.InvalidSpecReason, "%v", err)
	}
	return transient(v1alpha1.GitOperationFailedReason, err)
}
