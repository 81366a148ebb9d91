package stack

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// runPreview runs the preview that makes plan planID, saving Pulumi's update
// plan at planFile. Like every operation its start is in status first, so
// that a crash leaves a trace (recoverInterrupted counts an interrupted
// preview as no failure). Unlike an up (operateWith) it leaves the failure
// count, the backoff and the last attempted revision, program and inputs
// alone: a preview applies nothing, so it is no attempt, and decide keeps
// seeing the change as not yet attempted until an approved up runs.
func (r *StackReconciler) runPreview(ctx context.Context, st *reconcileState, planID, planFile string) (*runner.Result, *v1alpha1.OperationRecord, error) {
	if err := startAllowed(ctx); err != nil {
		return nil, nil, err
	}
	stack := st.stack
	id := newOperationID(runner.OpPreview)
	rec := v1alpha1.OperationRecord{
		ID:        id,
		Type:      v1alpha1.OperationPreview,
		Revision:  st.revision,
		StartedAt: metav1.Now(),
		Outcome:   v1alpha1.OutcomeRunning,
		Host:      r.hostOf(stack, id),
		Plan:      planID,
	}
	stack.Status.CurrentOperation = rec.DeepCopy()
	stack.Status.PushHistory(rec)
	if err := st.patchStart(ctx, &finding{kind: foundRunning,
		progress: fmt.Sprintf("Running preview %s of revision %s for plan %s", rec.ID, st.revision, planID),
		message:  fmt.Sprintf("Previewing revision %s", st.revision)}); err != nil {
		return nil, nil, transient(v1alpha1.OperationFailedReason, fmt.Errorf("record the start of the preview: %w", err))
	}
	r.inflight.start(stack.UID, rec.ID)
	defer func() { r.inflight.end(stack.UID, rec) }()
	r.recordf(stack, corev1.EventTypeNormal, "OperationStarted", string(rec.Type), "preview %s of revision %s started (plan %s)", rec.ID, st.revision, planID)

	res := r.execute(ctx, st, rec.ID, runner.OpPreview, st.artifact, opOptions{plan: planFile})
	operationsTotal.WithLabelValues(string(runner.OpPreview), string(res.Outcome)).Inc()
	operationSeconds.WithLabelValues(string(runner.OpPreview)).Observe(res.FinishedAt.Sub(res.StartedAt).Seconds())
	if res.Outcome != runner.OutcomeSucceeded {
		rec.Plan = "" // it made none
	}
	finishRecord(ctx, st, &rec, res)
	r.reportPolicy(ctx, st, string(rec.Type), res)
	return res, &rec, nil
}

// planDocument is the full plan of a successful preview: every changed
// resource, with the paths of its changed properties, never their values.
func planDocument(st *reconcileState, id string, mode v1alpha1.ApprovalMode, res *runner.Result) *plan.Document {
	stack := st.stack
	created := res.FinishedAt
	if created.IsZero() {
		created = time.Now()
	}
	c := res.Changes
	doc := &plan.Document{
		APIVersion:    plan.APIVersion,
		ID:            id,
		Namespace:     stack.Namespace,
		Name:          stack.Name,
		StackName:     stack.GetStackName(),
		Revision:      st.revision,
		ProgramDigest: st.programDigest,
		InputsDigest:  st.inputs.Digest,
		CreatedAt:     created.UTC().Truncate(time.Second),
		Mode:          mode,
		Changes: v1alpha1.ChangeSummary{Create: int64(c.Create), Update: int64(c.Update),
			Replace: int64(c.Replace), Delete: int64(c.Delete)},
		Same:      int64(c.Same),
		Resources: make([]v1alpha1.PlannedResource, 0, len(res.Resources)),
	}
	for _, rc := range res.Resources {
		paths := rc.Paths
		if len(paths) == 0 {
			paths = rc.Properties
		}
		doc.Resources = append(doc.Resources, v1alpha1.PlannedResource{URN: rc.URN, Type: rc.Type, Op: rc.Op, Properties: paths})
	}
	return doc
}

// pendingPlanOf is the part of a plan that status.pendingPlan carries: the
// first MaxPlanResources resources, each with at most MaxPlanProperties
// property paths, and the total.
func pendingPlanOf(doc *plan.Document) *v1alpha1.PendingPlan {
	p := &v1alpha1.PendingPlan{
		ID:            doc.ID,
		Revision:      doc.Revision,
		InputsDigest:  doc.InputsDigest,
		ProgramDigest: doc.ProgramDigest,
		CreatedAt:     metav1.NewTime(doc.CreatedAt),
		Changes:       doc.Changes,
		Total:         int64(len(doc.Resources)),
	}
	for _, r := range doc.Resources[:min(len(doc.Resources), v1alpha1.MaxPlanResources)] {
		// The API's bounds: a longer string would fail the whole status patch.
		r.URN, r.Type = cutUTF8(r.URN, 1024), cutUTF8(r.Type, 512)
		var props []string
		for _, path := range r.Properties[:min(len(r.Properties), v1alpha1.MaxPlanProperties)] {
			props = append(props, cutUTF8(path, 1024))
		}
		r.Properties = props
		p.Resources = append(p.Resources, r)
	}
	return p
}
