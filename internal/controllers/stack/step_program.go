package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
)

// resolveProgram finds the program digest of the resolved revision: the
// digest of spec.source.dir and of each spec.source.git.include path. decide
// compares it, not the revision, so that a commit elsewhere in a monorepo
// runs nothing.
//
// The revision is fetched (once per commit for every Stack, through the
// artifact cache) only when it is new to this Stack: at the revision and
// inputs of the last attempt or of the last applied up, the digest recorded
// then is the digest now, since the inputs digest covers spec.source and a
// revision's content never changes.
func (r *StackReconciler) resolveProgram(ctx context.Context, st *reconcileState) (stepResult, error) {
	s := &st.stack.Status
	switch {
	case s.LastAttemptedProgramDigest != "" && st.revision == s.LastAttemptedRevision && st.inputs.Digest == s.LastAttemptedInputsDigest:
		st.programDigest = s.LastAttemptedProgramDigest
		return stepContinue, nil
	case s.LastAppliedProgramDigest != "" && st.revision == s.LastAppliedRevision && st.inputs.Digest == s.InputsDigest:
		st.programDigest = s.LastAppliedProgramDigest
		return stepContinue, nil
	}
	if err := r.ensureArtifact(ctx, st); err != nil {
		return stepDone, err
	}
	digest, err := programDigest(ctx, r.Artifacts, st.stack, st.artifact)
	if err != nil {
		return stepDone, programDigestError(st.revision, err)
	}
	st.programDigest = digest
	adoptProgramDigest(s, st.revision, st.inputs.Digest, digest)
	adoptFromArtifacts(ctx, r.Artifacts, st.stack, st.inputs.Digest)
	return stepContinue, nil
}

// programDigest is the digest of the Stack's program paths in art.
func programDigest(ctx context.Context, store *artifact.Store, stack *v1alpha1.Stack, art artifact.Artifact) (string, error) {
	src := stack.Spec.Source
	var include []string
	if src.Git != nil {
		include = src.Git.Include
	}
	return store.ProgramDigest(ctx, art, src.Dir, include)
}

// programDigestError says which path is wrong and how to fix it. A path
// missing from one revision is Stalled for that revision alone: the commit
// that adds it must be seen.
func programDigestError(revision string, err error) error {
	var missing *artifact.MissingPathError
	var unsafe *artifact.UnsafePathError
	switch {
	case errors.As(err, &missing):
		return stallingAt(revision, v1alpha1.ArtifactFailedReason,
			"spec.source.git.include %q is not in revision %s: commit it, or remove it from spec.source.git.include (checked again every spec.interval)",
			missing.Path, revision)
	case errors.As(err, &unsafe):
		return stallingAt(revision, v1alpha1.ArtifactFailedReason,
			"the program's paths (spec.source.dir, spec.source.git.include) in revision %s: %v; a symbolic link must stay inside the folder it is in (checked again every spec.interval)",
			revision, err)
	}
	return transient(v1alpha1.ArtifactFailedReason, fmt.Errorf("digest of the program in revision %s: %w", revision, err))
}

// adoptProgramDigest fills in the program digests of a Stack last applied
// (or attempted) before they were recorded, when that was at this very
// revision and inputs: the program is the same, so upgrading the controller
// runs no up. A Stack whose revision moved on meanwhile runs one up.
func adoptProgramDigest(s *v1alpha1.StackStatus, revision, inputsDigest, digest string) {
	if s.LastAppliedProgramDigest == "" && s.LastAppliedRevision != "" && s.LastAppliedRevision == revision && s.InputsDigest == inputsDigest {
		s.LastAppliedProgramDigest = digest
	}
	if s.LastAttemptedProgramDigest == "" && s.LastAttemptedRevision != "" && s.LastAttemptedRevision == revision && s.LastAttemptedInputsDigest == inputsDigest {
		s.LastAttemptedProgramDigest = digest
	}
}

// adoptFromArtifacts fills in the program digests of a Stack applied (or
// attempted) before they were recorded, at an older revision, from the trees
// recorded then (lastAppliedArtifact, lastAttemptedArtifact) while they are
// still in the cache: with the same inputs, which cover spec.source, their
// digest is the one the operation ran. So a branch that moved on by a commit
// elsewhere, while the controller was upgraded, runs no up either. A tree no
// longer cached, or no longer readable, leaves the digest empty: one up.
func adoptFromArtifacts(ctx context.Context, store *artifact.Store, stack *v1alpha1.Stack, inputsDigest string) {
	s := &stack.Status
	digestOf := func(ref *v1alpha1.ArtifactReference, revision string) string {
		if ref == nil || ref.Revision != revision {
			return ""
		}
		art, ok := store.Get(ref.Digest)
		if !ok {
			return ""
		}
		d, err := programDigest(ctx, store, stack, art)
		if err != nil {
			return ""
		}
		return d
	}
	if s.LastAppliedProgramDigest == "" && s.InputsDigest == inputsDigest {
		s.LastAppliedProgramDigest = digestOf(s.LastAppliedArtifact, s.LastAppliedRevision)
	}
	if s.LastAttemptedProgramDigest == "" && s.LastAttemptedInputsDigest == inputsDigest {
		s.LastAttemptedProgramDigest = digestOf(s.LastAttemptedArtifact, s.LastAttemptedRevision)
	}
}

// skipUp records a new revision that changed nothing under the program's
// paths: it becomes the applied revision, with one history entry, and no
// Pulumi process runs. decide skips only when the last attempt succeeded at
// this program and inputs, so the newest operation before the entry is a
// success, and what looks at the newest finished operation (stale locks,
// interruptions, backoff) sees the same as before it.
func (r *StackReconciler) skipUp(ctx context.Context, st *reconcileState) error {
	if err := r.ensureArtifact(ctx, st); err != nil {
		return err
	}
	stack := st.stack
	paths := programPaths(stack)
	now := metav1.Now()
	stack.Status.PushHistory(v1alpha1.OperationRecord{
		ID:         skipID(now.Time),
		Type:       v1alpha1.OperationUp,
		Revision:   st.revision,
		StartedAt:  now,
		FinishedAt: &now,
		Outcome:    v1alpha1.OutcomeSkipped,
		Message: truncate(fmt.Sprintf("skipped: no change under %s in %s (the program is the one applied at %s)",
			paths, st.revision, stack.Status.LastAppliedRevision), 2000),
	})
	stack.Status.LastAppliedRevision = st.revision
	stack.Status.LastAppliedArtifact = &v1alpha1.ArtifactReference{Revision: st.revision, Digest: st.artifact.Digest}
	upsSkipped.Inc()
	r.recordf(stack, corev1.EventTypeNormal, "UpSkipped", string(v1alpha1.OperationUp), "no change under %s in %s: no up", paths, st.revision)
	st.found(finding{kind: foundApplied, message: appliedMessage(stack)})
	return nil
}

// appliedMessage is Ready's message when the stack is up to date. At a
// revision whose up was skipped it says so, at every later reconcile too.
func appliedMessage(stack *v1alpha1.Stack) string {
	rev := stack.Status.LastAppliedRevision
	if h := stack.Status.History; len(h) > 0 && h[0].Outcome == v1alpha1.OutcomeSkipped && h[0].Revision == rev {
		return fmt.Sprintf("Applied revision %s: no change under %s in it", rev, programPaths(stack))
	}
	return "Applied revision " + rev
}

// programPaths names the paths the program digest covers, for messages:
// "a/, shared/", or "the repository" for the whole of it.
func programPaths(stack *v1alpha1.Stack) string {
	d := path.Clean("/" + stack.Spec.Source.Dir)
	if d == "/" {
		if stack.Spec.Source.OCI != nil {
			return "the artifact"
		}
		return "the repository" // the whole tree: include adds nothing
	}
	paths := []string{strings.TrimPrefix(d, "/") + "/"}
	if stack.Spec.Source.Git != nil {
		paths = append(paths, stack.Spec.Source.Git.Include...)
	}
	return strings.Join(paths, ", ")
}

// skipID names a skip in status.history, apart from operations' IDs.
func skipID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "skip-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}
