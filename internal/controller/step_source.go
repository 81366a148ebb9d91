package controller

import (
	"context"
	"errors"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/source"
)

// resolveSource finds the revision the Stack's source points at now, with the
// resolver of its kind (source_git.go, source_oci.go), and leaves in st how to
// fetch it. Resolutions are shared between Stacks and reused for up to
// sourceMaxAge; a reconcile-now request forces a fresh one.
func (r *StackReconciler) resolveSource(ctx context.Context, st *reconcileState) (stepResult, error) {
	src := st.stack.Spec.Source
	switch {
	case src.Git != nil:
		return stepContinue, r.resolveGit(ctx, st)
	case src.OCI != nil:
		return stepContinue, r.resolveOCI(ctx, st)
	case src.SourceRef != nil:
		return stepContinue, r.resolveFlux(ctx, st)
	}
	return stepDone, stalling(v1alpha1.InvalidSpecReason, "spec.source: set one of git, oci or sourceRef")
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
	art, err := st.fetch(ctx)
	if err != nil {
		return err
	}
	// A program missing from this revision is Stalled for the revision alone:
	// retrying it cannot help, but the revision that adds it must be seen.
	dir := st.stack.Spec.Source.Dir
	project, err := artifact.SubdirPath(art.Path, dir)
	if err != nil {
		return stallingAt(st.revision, v1alpha1.ArtifactFailedReason,
			"spec.source.dir %q in revision %s: %v; fix spec.source.dir or %s (checked again every spec.interval)", dir, st.revision, err, addFolderHint(st.stack))
	}
	if _, err := runner.ProjectName(project); err != nil {
		return stallingAt(st.revision, v1alpha1.ProgramErrorReason,
			"spec.source.dir %q in revision %s: %v; %s with a Pulumi project there (checked again every spec.interval)", dir, st.revision, err, publishHint(st.stack))
	}
	st.artifact = art
	return nil
}

// addFolderHint and publishHint say how a user puts a missing program into
// the Stack's kind of source.
func addFolderHint(stack *v1alpha1.Stack) string {
	switch {
	case stack.Spec.Source.OCI != nil:
		return "push an artifact that holds the folder"
	case stack.Spec.Source.SourceRef != nil:
		return "publish the folder in the source's artifact"
	}
	return "commit the folder"
}

func publishHint(stack *v1alpha1.Stack) string {
	switch {
	case stack.Spec.Source.OCI != nil:
		return "push an artifact"
	case stack.Spec.Source.SourceRef != nil:
		return "publish an artifact"
	}
	return "commit"
}

// programAt is the program of a revision this Stack ran: from the cache, or,
// when the cache lost it (a new data volume), fetched again at exactly that
// revision.
func (r *StackReconciler) programAt(ctx context.Context, stack *v1alpha1.Stack, ref v1alpha1.ArtifactReference) (artifact.Artifact, error) {
	if art, ok := r.Artifacts.Get(ref.Digest); ok {
		return art, nil
	}
	var fetched artifact.Artifact
	var err error
	switch {
	case stack.Spec.Source.Git != nil:
		fetched, err = r.gitFetchRevision(ctx, stack, ref.Revision)
	case stack.Spec.Source.OCI != nil:
		fetched, err = r.ociFetchRevision(ctx, stack, ref.Revision)
	case stack.Spec.Source.SourceRef != nil:
		fetched, err = r.fluxFetchRevision(ctx, stack, ref.Revision)
	default:
		err = errors.New("spec.source sets no source kind")
	}
	if err != nil {
		return artifact.Artifact{}, err
	}
	return fetched, nil
}

// sourceError turns the source package's typed errors into the reconciler's.
// failedReason is the kind's reason for any other failure.
func sourceError(err error, failedReason string) error {
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
	return transient(failedReason, err)
}
