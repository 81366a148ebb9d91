package stack

import (
	"context"
	"errors"
	"time"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// gitRef is the resolver's Ref for spec.source.git.ref (sameSource).
var gitRef = git.SpecRef

// resolveSource finds the revision the Stack's source points at now, with
// its kind (internal/source/...), and leaves in st how to fetch it.
// Resolutions are shared between Stacks and reused for up to sourceMaxAge;
// a reconcile-now request forces a fresh one.
func (r *StackReconciler) resolveSource(ctx context.Context, st *reconcileState) (stepResult, error) {
	kind := r.Sources.Of(st.stack)
	if kind == nil {
		return stepDone, stalling(v1alpha1.InvalidSpecReason, "spec.source: set one of git, oci or sourceRef")
	}
	res, err := kind.Resolve(ctx, st.stack, r.resolveRequest(st.stack))
	if err != nil {
		return stepContinue, err
	}
	st.revision, st.fetch = res.Revision, res.Fetch
	return stepContinue, nil
}

// resolveRequest is how stack resolves now: how old a shared resolution
// may be, and whether a reconcile-now request asks for a fresh one.
func (r *StackReconciler) resolveRequest(stack *v1alpha1.Stack) source.ResolveRequest {
	req := source.ResolveRequest{MaxAge: r.sourceMaxAge(stack), Requested: isRequested(stack)}
	if t, ok := requestStamp(stack); ok && req.Requested {
		req.RequestedAt = t
	}
	return req
}

// requestStampWindow is how old a reconcile-now time may be and still be
// trusted as "when it was asked": an old or hand-written time would let a
// resolution from before the request serve it, so it skips the cache instead.
const requestStampWindow = 10 * time.Minute

// requestStamp is the time of the reconcile-now request, when its value is
// an RFC 3339 time within requestStampWindow (a Receiver's, or `kubectl
// annotate ...=$(date -u +%FT%T.%NZ)`).
func requestStamp(stack *v1alpha1.Stack) (time.Time, bool) {
	v, _ := requestedAt(stack)
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || time.Since(t) >= requestStampWindow {
		return time.Time{}, false
	}
	return t, true
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
			"spec.source.dir %q in revision %s: %v; fix spec.source.dir or %s (checked again every spec.interval)", dir, st.revision, err, r.addFolderHint(st.stack))
	}
	if _, err := runner.ProjectName(project); err != nil {
		return stallingAt(st.revision, v1alpha1.ProgramErrorReason,
			"spec.source.dir %q in revision %s: %v; %s with a Pulumi project there (checked again every spec.interval)", dir, st.revision, err, r.publishHint(st.stack))
	}
	st.artifact = art
	return nil
}

// addFolderHint and publishHint say how a user puts a missing program into
// the Stack's kind of source.
func (r *StackReconciler) addFolderHint(stack *v1alpha1.Stack) string {
	if k := r.Sources.Of(stack); k != nil {
		return k.Hints().AddFolder
	}
	return "commit the folder"
}

func (r *StackReconciler) publishHint(stack *v1alpha1.Stack) string {
	if k := r.Sources.Of(stack); k != nil {
		return k.Hints().Publish
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
	kind := r.Sources.Of(stack)
	if kind == nil {
		return artifact.Artifact{}, errors.New("spec.source sets no source kind")
	}
	return kind.FetchRevision(ctx, stack, ref.Revision)
}
