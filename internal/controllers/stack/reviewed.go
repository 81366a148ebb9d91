package stack

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

// The merge applies what was reviewed. A pull request's preview keeps its
// update plan in the review store (preview_run.go), with the program and
// inputs digests it was made of. When the change an up is about to apply
// has exactly those digests (the merge brought the reviewed program, and
// no input changed since), the up applies that plan (`pulumi up --plan`):
// whatever would differ from the review fails the up instead of being
// applied. Under Manual approval the reviewed plan becomes the pending plan,
// without a second preview, and waits for its approval as any plan does.
// A plan made against the stack as it was before another up is no longer
// the stack's: every up that succeeds ends the Stack's reviewed plans.

// Reasons of the events about reviewed plans.
const (
	reviewedPlanEvent        = "ReviewedPlanApplied"
	reviewedPlanInvalidEvent = "ReviewedPlanInvalid"
)

// reviewedPlan is the newest reviewed plan of the change at hand, or nil.
func (r *StackReconciler) reviewedPlan(ctx context.Context, st *reconcileState) *plan.Document {
	if r.Reviews == nil || st.inputs == nil || st.programDigest == "" {
		return nil
	}
	docs, err := r.Reviews.Documents(st.stack.UID)
	if err != nil {
		log.FromContext(ctx).Info("could not read the reviewed plans", "error", err.Error())
		return nil
	}
	var best *plan.Document
	for _, d := range docs {
		if d.ProgramDigest != st.programDigest || d.InputsDigest != st.inputs.Digest {
			continue
		}
		if best == nil || d.CreatedAt.After(best.CreatedAt) {
			best = d
		}
	}
	return best
}

// reviewedBy says which review made doc: "the review of pull request 12 at
// 1a2b3c4d5e6f".
func reviewedBy(doc *plan.Document) string {
	if m := reviewRevisionRE.FindStringSubmatch(doc.Revision); m != nil {
		return fmt.Sprintf("the review of pull request %s at %s", m[1], short(m[2]))
	}
	return "a review (plan " + doc.ID + ")"
}

var reviewRevisionRE = regexp.MustCompile(`^pull/(\d+)@sha\d+:([0-9a-f]+)$`)

// useReviewedPlan makes an Auto up apply the reviewed plan of its change,
// when there is one.
func (r *StackReconciler) useReviewedPlan(ctx context.Context, st *reconcileState) {
	doc := r.reviewedPlan(ctx, st)
	if doc == nil {
		return
	}
	st.reviewed = &approvedPlan{id: doc.ID, file: r.Reviews.PlanFile(st.stack.UID, doc.ID), by: reviewedBy(doc)}
}

// adoptReviewedPlan makes the reviewed plan of the change the pending plan
// (Manual, PreviewOnly): the person approves what the pull request showed,
// and no second preview runs. It returns nil when there is none or it cannot
// be copied (then a preview makes the plan, as without a review).
func (r *StackReconciler) adoptReviewedPlan(ctx context.Context, st *reconcileState, mode v1alpha1.ApprovalMode) *plan.Document {
	reviewed := r.reviewedPlan(ctx, st)
	if reviewed == nil {
		return nil
	}
	doc := *reviewed
	doc.ID = newOperationID("plan")
	doc.Mode = mode
	doc.Revision = st.revision
	doc.CreatedAt = time.Now().UTC().Truncate(time.Second)
	if err := r.Plans.CopyFrom(r.Reviews, st.stack.UID, reviewed.ID, &doc); err != nil {
		log.FromContext(ctx).Error(err, "could not adopt the reviewed plan; previewing instead", "plan", reviewed.ID)
		return nil
	}
	r.recordf(st.stack, corev1.EventTypeNormal, planCreatedEvent, "Plan", "plan %s of revision %s is the plan of %s (no second preview)",
		doc.ID, st.revision, reviewedBy(reviewed))
	return &doc
}

// reviewedApplied ends the reviewed plans after an up succeeded: the one it
// applied, and every other, made against the stack as it was before.
func (r *StackReconciler) reviewedApplied(st *reconcileState) {
	if r.Reviews == nil {
		return
	}
	if a := st.reviewed; a != nil {
		r.recordf(st.stack, corev1.EventTypeNormal, reviewedPlanEvent, "Plan", "revision %s applied exactly the plan of %s (%s)", st.revision, a.by, a.id)
	}
	_ = r.Reviews.Prune(st.stack.UID, "")
}

// reviewedFailed drops a reviewed plan Pulumi refused as no longer valid:
// the stack changed since the review, or the merged change does more than
// the review showed. Nothing beyond the plan was applied; the retry runs as
// spec.approval.mode says (Auto applies, Manual previews and waits).
func (r *StackReconciler) reviewedFailed(st *reconcileState, err error) {
	a := st.reviewed
	if a == nil || reasonOf(err, "") != v1alpha1.PlanInvalidReason {
		return
	}
	_ = r.Reviews.Remove(st.stack.UID, a.id)
	r.recordf(st.stack, corev1.EventTypeWarning, reviewedPlanInvalidEvent, "Plan",
		"revision %s would not apply as %s showed (%s): nothing beyond that plan was applied; %s",
		st.revision, a.by, a.id, strings.TrimSpace(retryHint(st.stack)))
}

func retryHint(stack *v1alpha1.Stack) string {
	if stack.GetApprovalMode() == v1alpha1.ApprovalAuto {
		return "the retry applies the revision without the reviewed plan"
	}
	return "the retry previews the revision again and waits for approval"
}
