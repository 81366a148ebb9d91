package stack

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// revisionRequest reads the revision preview annotation; ok is false when
// there is none or it is no request.
func revisionRequest(stack *v1alpha1.Stack) (v1alpha1.RevisionPreviewRequest, bool) {
	raw, found := stack.Annotations[v1alpha1.RevisionPreviewAnnotation]
	if !found {
		return v1alpha1.RevisionPreviewRequest{}, false
	}
	var q v1alpha1.RevisionPreviewRequest
	if json.Unmarshal([]byte(raw), &q) != nil || q.Revision == "" || q.RequestedAt == "" || len(q.Revision) > 256 || len(q.RequestedAt) > 64 {
		return v1alpha1.RevisionPreviewRequest{RequestedAt: raw}, true // answered as invalid
	}
	return q, true
}

// revisionPending: the request has no answer yet.
func revisionPending(stack *v1alpha1.Stack) (v1alpha1.RevisionPreviewRequest, bool) {
	q, ok := revisionRequest(stack)
	if !ok {
		return q, false
	}
	a := stack.Status.RevisionPreview
	return q, a == nil || a.RequestedAt != q.RequestedAt || a.Phase == v1alpha1.PreviewRunning
}

// previewRevision answers `stackpilot preview STACK --revision REF`: the
// revision is resolved on the Stack's Git repository, and previewed as a
// pull request's head is (runReview), whether or not spec.previews is on:
// nothing is posted anywhere, the answer is status.revisionPreview and the
// plan kept (which, like a pull request's, an up of the same program and
// inputs applies). A newer request cancels this one.
func (r *PreviewReconciler) previewRevision(ctx context.Context, stack *v1alpha1.Stack, q v1alpha1.RevisionPreviewRequest) error {
	a := v1alpha1.RevisionPreview{Revision: q.Revision, RequestedAt: q.RequestedAt, UpdatedAt: metav1.NewTime(r.now())}
	answer := func() error {
		before := stack.DeepCopy()
		stack.Status.RevisionPreview = a.DeepCopy()
		if err := r.Status().Patch(ctx, stack, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("record the preview of revision %s: %w", q.Revision, err)
		}
		return nil
	}
	fail := func(msg string) error {
		a.Phase, a.Message = v1alpha1.PreviewFailed, cutUTF8(msg, 2000)
		return answer()
	}
	kind := r.gitKind()
	switch {
	case q.Revision == "":
		return fail(fmt.Sprintf("the annotation %s is not {\"revision\", \"requestedAt\"}", v1alpha1.RevisionPreviewAnnotation))
	case stack.Spec.Source.Git == nil || kind == nil:
		return fail("a revision is previewed on demand for a Stack with spec.source.git only")
	}
	rev, err := kind.ResolveAny(ctx, stack, q.Revision)
	if err != nil {
		return fail(fmt.Sprintf("revision %s: %v", q.Revision, err))
	}
	a.Commit, a.Phase, a.Operation = rev.Commit, v1alpha1.PreviewRunning, newOperationID(runner.OpPreview)
	if err := answer(); err != nil {
		return err
	}
	name := rev.Name
	if name == "" {
		name = "commit"
	}
	t := reviewTarget{ref: rev.Ref, head: rev.Commit, revision: fmt.Sprintf("%s@sha1:%s", name, rev.Commit),
		planID: "review-rev-" + short(rev.Commit), what: "revision " + q.Revision}

	opCtx, cancel := context.WithCancel(ctx)
	key := previewKey{uid: stack.UID, number: 0}
	r.running.start(key, q.RequestedAt, cancel)
	res, msg, planID := r.runReview(opCtx, stack, t, a.Operation)
	r.running.end(key)
	superseded := opCtx.Err() != nil
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if superseded {
		log.FromContext(ctx).Info("revision preview cancelled by a newer request", "revision", q.Revision)
		return nil
	}
	a.UpdatedAt, a.Plan = metav1.NewTime(r.now()), planID
	if res == nil || res.Outcome != runner.OutcomeSucceeded {
		return fail(msg)
	}
	a.Phase = v1alpha1.PreviewSucceeded
	c := res.Changes
	a.Changes = &v1alpha1.ChangeSummary{Create: int64(c.Create), Update: int64(c.Update), Replace: int64(c.Replace), Delete: int64(c.Delete)}
	a.Message = "preview: " + summaryLine(res)
	return answer()
}
