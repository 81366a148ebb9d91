package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// Event reasons of the approval flow (the condition reasons are the API's).
const (
	planCreatedEvent  = "PlanCreated"
	planReplacedEvent = "PlanReplaced"
	planApprovedEvent = "PlanApproved"
	planDroppedEvent  = "PlanDropped"
	staleApproval     = "ApprovalStale"
)

// approvedPlan is the plan gateApproval lets runUp apply.
type approvedPlan struct {
	id   string
	file string // Pulumi's update plan: `pulumi up --plan`
	by   string // the annotation's last writer
}

// gateApproval holds an up back until a person approves its exact plan
// (spec.approval.mode Manual), or for ever (PreviewOnly). A change without a
// plan is previewed, and the plan is kept (PlanStore) and shown in
// status.pendingPlan; a plan made for another revision, program or inputs is
// replaced, so that an approval never applies a change it did not see (a
// new revision whose program and inputs are those of the plan is no other
// change: the plan stays, as decide skips such a revision). It is on the
// route of ActionUp alone (route.go): a drift remediate and a rollback put
// back what was applied before, and are not gated.
func (r *StackReconciler) gateApproval(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	mode := stack.GetApprovalMode()
	if mode == v1alpha1.ApprovalAuto {
		if p := stack.Status.PendingPlan; p != nil {
			r.dropPlan(stack, p)
			r.recordf(stack, corev1.EventTypeNormal, planDroppedEvent, "Plan",
				"plan %s dropped: spec.approval.mode is Auto, changes are applied without approval", p.ID)
		}
		conditions.Delete(stack, v1alpha1.PlanPendingCondition)
		r.useReviewedPlan(ctx, st)
		return stepContinue, nil
	}
	if p := stack.Status.PendingPlan; p != nil {
		why := r.planOutdated(st, p, mode)
		if why == "" {
			return r.awaitApproval(ctx, st, p, mode)
		}
		r.dropPlan(stack, p)
		r.recordf(stack, corev1.EventTypeNormal, planReplacedEvent, "Plan",
			"plan %s of revision %s is replaced: %s; an approval of %s applies nothing", p.ID, p.Revision, why, p.ID)
	}
	return r.makePlan(ctx, st, mode)
}

// planOutdated says why the pending plan is not the plan of the change at
// hand, or "" when it is.
func (r *StackReconciler) planOutdated(st *reconcileState, p *v1alpha1.PendingPlan, mode v1alpha1.ApprovalMode) string {
	// Not the revision: in a monorepo a commit elsewhere in the repository
	// is a new revision with the same program (decide's rule), and the plan
	// of that program with those inputs is still the one to approve.
	switch {
	case p.ProgramDigest != st.programDigest:
		return "the program changed"
	case p.InputsDigest != st.inputs.Digest:
		return "the inputs changed"
	}
	doc, err := r.Plans.Document(st.stack.UID, p.ID)
	if err != nil || !r.Plans.Has(st.stack.UID, p.ID) {
		return "its files are not in the controller's data dir (a new controller or data dir)"
	}
	if doc.Mode != mode {
		return fmt.Sprintf("spec.approval.mode is %s now, the plan was made in %s", mode, doc.Mode)
	}
	return ""
}

// awaitApproval lets the approved plan through to runUp, or reports that it
// waits. While it waits, drift checks of the applied revision go on, but
// nothing is remediated (waiting ends the route before remediateDrift): a
// remediate is an up, and would take the place of the change that waits
// (its record, its attempted revision).
func (r *StackReconciler) awaitApproval(ctx context.Context, st *reconcileState, p *v1alpha1.PendingPlan, mode v1alpha1.ApprovalMode) (stepResult, error) {
	stack := st.stack
	if mode == v1alpha1.ApprovalPreviewOnly {
		markPreviewOnly(st, p)
		return stepDone, r.driftIfDue(ctx, st)
	}
	value, by, err := r.approval(ctx, stack)
	if err != nil {
		return stepDone, transient(v1alpha1.OperationFailedReason, err)
	}
	if value != p.ID {
		markAwaitingApproval(st, p, value)
		if value != "" && !appliedPlan(stack, value) {
			r.recordf(stack, corev1.EventTypeWarning, staleApproval, "Approve",
				"the approval (by %s) names plan %s, which is not the pending plan %s: nothing was applied; approve %s to apply it", by, value, p.ID, p.ID)
		}
		return stepDone, r.driftIfDue(ctx, st)
	}
	st.approved = &approvedPlan{id: p.ID, file: r.Plans.PlanFile(stack.UID, p.ID), by: by}
	if !approvedRetry(stack, p.ID) {
		r.recordf(stack, corev1.EventTypeNormal, planApprovedEvent, "Approve", "plan %s of revision %s approved by %s", p.ID, p.Revision, by)
	}
	conditions.MarkTrue(stack, v1alpha1.PlanPendingCondition, planApprovedReason,
		"Plan %s of revision %s, approved by %s, is being applied", p.ID, p.Revision, by)
	return stepContinue, nil
}

// planApprovedReason is PlanPending's reason while an approved plan is
// applied, or retried after its up failed: it waits for no one.
const planApprovedReason = "Approved"

// approvedRetry is true when PlanPending already says that plan id is
// approved: this up retries it, and the approval was told once.
func approvedRetry(stack *v1alpha1.Stack, id string) bool {
	c := conditions.Get(stack, v1alpha1.PlanPendingCondition)
	return c != nil && c.Reason == planApprovedReason && strings.HasPrefix(c.Message, "Plan "+id+" ")
}

// appliedPlan is true when an up in the history applied plan id: an approval
// left on the Stack after its plan was applied is no stale approval.
func appliedPlan(stack *v1alpha1.Stack, id string) bool {
	for _, h := range stack.Status.History {
		if h.Type == v1alpha1.OperationUp && h.Plan == id {
			return true
		}
	}
	return false
}

// makePlan previews the change, keeps its plan and reports it pending.
func (r *StackReconciler) makePlan(ctx context.Context, st *reconcileState, mode v1alpha1.ApprovalMode) (stepResult, error) {
	stack := st.stack
	if doc := r.adoptReviewedPlan(ctx, st, mode); doc != nil {
		p := pendingPlanOf(doc)
		stack.Status.PendingPlan = p
		return r.awaitApproval(ctx, st, p, mode)
	}
	id := newOperationID("plan")
	file, err := r.Plans.Stage(stack.UID, id)
	if err != nil {
		return stepDone, transient(v1alpha1.OperationFailedReason, err)
	}
	res, rec, err := r.runPreview(ctx, st, id, file)
	if err != nil {
		return stepDone, err
	}
	if res.Outcome != runner.OutcomeSucceeded {
		reason := failureReason(res.ErrorClass)
		msg := fmt.Sprintf("preview %s of revision %s failed: %s", rec.ID, st.revision, rec.Message)
		conditions.MarkFalse(stack, v1alpha1.PlanPendingCondition, v1alpha1.NoPendingPlanReason, "No plan: %s", msg)
		r.event(stack, corev1.EventTypeWarning, reason, string(v1alpha1.OperationPreview), msg)
		// Retried after spec.retryInterval: a preview is no attempt, so
		// it counts no failure and has no backoff of its own.
		return stepDone, transient(reason, errors.New(msg))
	}
	doc := planDocument(st, id, mode, res)
	if err := r.Plans.Commit(stack.UID, doc); err != nil {
		replaceHistory(stack, withoutPlan(*rec))
		return stepDone, transient(v1alpha1.OperationFailedReason, fmt.Errorf("keep plan %s: %w", id, err))
	}
	p := pendingPlanOf(doc)
	stack.Status.PendingPlan = p
	how := "it is never applied (spec.approval.mode PreviewOnly)"
	if mode == v1alpha1.ApprovalManual {
		how = "approve it with " + approveHint(stack, id)
	}
	r.recordf(stack, corev1.EventTypeNormal, planCreatedEvent, "Plan", "plan %s of revision %s: %s; %s", id, st.revision, planChanges(p), how)
	return r.awaitApproval(ctx, st, p, mode)
}

func withoutPlan(rec v1alpha1.OperationRecord) v1alpha1.OperationRecord {
	rec.Plan = ""
	return rec
}

// dropPlan forgets the pending plan and removes its files.
func (r *StackReconciler) dropPlan(stack *v1alpha1.Stack, p *v1alpha1.PendingPlan) {
	_ = r.Plans.Remove(stack.UID, p.ID)
	stack.Status.PendingPlan = nil
	conditions.MarkFalse(stack, v1alpha1.PlanPendingCondition, v1alpha1.NoPendingPlanReason, "No plan waits for approval")
}

// settlePlan runs when decide found nothing to apply: a pending plan is
// dropped (the change it was made for was reverted, say), and PlanPending
// says there is none (Manual, PreviewOnly) or is absent (Auto).
func (r *StackReconciler) settlePlan(st *reconcileState) {
	stack := st.stack
	if p := stack.Status.PendingPlan; p != nil {
		r.dropPlan(stack, p)
		r.recordf(stack, corev1.EventTypeNormal, planDroppedEvent, "Plan",
			"plan %s of revision %s dropped: the applied revision, program and inputs are current, nothing is left to apply", p.ID, p.Revision)
	}
	switch {
	case stack.GetApprovalMode() == v1alpha1.ApprovalAuto:
		conditions.Delete(stack, v1alpha1.PlanPendingCondition)
	case conditions.Get(stack, v1alpha1.PlanPendingCondition) == nil:
		conditions.MarkFalse(stack, v1alpha1.PlanPendingCondition, v1alpha1.NoPendingPlanReason, "No plan waits for approval")
	}
}

// planApplied ends the approval of a plan an up just applied.
func (r *StackReconciler) planApplied(st *reconcileState, res *runner.Result) {
	stack, a := st.stack, st.approved
	_ = r.Plans.Remove(stack.UID, a.id)
	stack.Status.PendingPlan = nil
	conditions.MarkFalse(stack, v1alpha1.PlanPendingCondition, v1alpha1.PlanAppliedReason,
		"Applied plan %s of revision %s, approved by %s", a.id, st.revision, a.by)
	r.recordf(stack, corev1.EventTypeNormal, v1alpha1.PlanAppliedReason, "Approve",
		"plan %s of revision %s, approved by %s, applied: %s", a.id, st.revision, a.by, summaryLine(res))
}

// planFailed drops a plan Pulumi refused as no longer valid: the stack
// changed since the preview, so the retry previews again, and that new plan
// needs its own approval. A plan whose up failed otherwise (a backend down,
// a lock) stays approved: its retry can still apply no more than the plan.
//
// Either way PlanPending no longer says that the plan waits for approval: it
// was approved, and what waits is the retry of its up.
func (r *StackReconciler) planFailed(st *reconcileState, err error) {
	stack, a := st.stack, st.approved
	if stack.Status.PendingPlan == nil {
		return
	}
	if reasonOf(err, "") != v1alpha1.PlanInvalidReason {
		p := stack.Status.PendingPlan
		conditions.MarkTrue(stack, v1alpha1.PlanPendingCondition, planApprovedReason,
			"Plan %s of revision %s, approved by %s, is not applied yet: its up failed (%s), and is retried with the failure backoff; the approval stands",
			p.ID, p.Revision, a.by, reasonOf(err, v1alpha1.OperationFailedReason))
		return
	}
	r.dropPlan(stack, stack.Status.PendingPlan)
	conditions.MarkFalse(stack, v1alpha1.PlanPendingCondition, v1alpha1.PlanInvalidReason,
		"Plan %s is no longer valid and was dropped; the retry makes a new plan, which needs a new approval", a.id)
	r.recordf(stack, corev1.EventTypeWarning, v1alpha1.PlanInvalidReason, "Approve",
		"plan %s of revision %s, approved by %s, is no longer valid: nothing beyond the plan changed; the retry makes a new plan, which needs a new approval", a.id, st.revision, a.by)
}

// upOptions are the options of runUp's up: with an approved plan, exactly
// that plan is applied, and the record says which and who approved it.
func (st *reconcileState) upOptions() opOptions {
	if st.approved == nil && st.reviewed != nil {
		return opOptions{plan: st.reviewed.file, planID: st.reviewed.id, approvedBy: st.reviewed.by}
	}
	if st.approved == nil {
		return opOptions{}
	}
	return opOptions{plan: st.approved.file, planID: st.approved.id, approvedBy: st.approved.by}
}

// markAwaitingApproval reports a plan that waits for a person: PlanPending,
// and Ready False (summarize.go) until it is approved.
func markAwaitingApproval(st *reconcileState, p *v1alpha1.PendingPlan, value string) {
	stack := st.stack
	msg := fmt.Sprintf("Plan %s of revision %s waits for approval (%s): approve it with %s", p.ID, p.Revision, planChanges(p), approveHint(stack, p.ID))
	if value != "" && value != p.ID {
		msg += fmt.Sprintf("; the annotation %s names %s, which is not this plan: nothing was applied", v1alpha1.ApproveAnnotation, value)
	}
	conditions.MarkTrue(stack, v1alpha1.PlanPendingCondition, v1alpha1.AwaitingApprovalReason, "%s", msg)
	st.found(finding{kind: foundAwaitingApproval, message: msg})
}

// markPreviewOnly reports a PreviewOnly plan. Ready is True (summarize.go):
// the Stack does all it is asked to (preview, never apply), and tools that
// wait for Ready (kstatus, a Kustomization's wait) would otherwise wait for
// ever.
func markPreviewOnly(st *reconcileState, p *v1alpha1.PendingPlan) {
	msg := fmt.Sprintf("Plan %s of revision %s: %s; spec.approval.mode PreviewOnly applies nothing", p.ID, p.Revision, planChanges(p))
	conditions.MarkTrue(st.stack, v1alpha1.PlanPendingCondition, v1alpha1.PreviewOnlyReason, "%s", msg)
	st.found(finding{kind: foundPreviewOnly, message: msg})
}

func approveHint(stack *v1alpha1.Stack, id string) string {
	return fmt.Sprintf("`kubectl annotate stack %s -n %s %s=%s --overwrite` or `stackpilot approve %s -n %s`",
		stack.Name, stack.Namespace, v1alpha1.ApproveAnnotation, id, stack.Name, stack.Namespace)
}

func planChanges(p *v1alpha1.PendingPlan) string {
	c := p.Changes
	return fmt.Sprintf("%d to create, %d to update, %d to replace, %d to delete", c.Create, c.Update, c.Replace, c.Delete)
}
