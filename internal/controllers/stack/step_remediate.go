package stack

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// remediateDrift repairs, in Remediate mode, what this reconcile's drift
// check found drifted (checkDrift, checkDriftAfterUp: st.drift). When the
// remediate ran, the reconcile ends: it published its outputs, so there is
// nothing left for restoreOutputs.
func (r *StackReconciler) remediateDrift(ctx context.Context, st *reconcileState) (stepResult, error) {
	d := st.drift
	if d == nil || len(d.filter.Drifted) == 0 || st.stack.GetDriftMode() != v1alpha1.DriftRemediate {
		return stepContinue, nil
	}
	ran, err := r.remediate(ctx, st, d.program, d.filter)
	if err != nil || ran {
		return stepDone, err
	}
	return stepContinue, nil
}

// retryRemediate retries a failed remediate (ActionRemediate). No check
// first: the failed remediate's refresh wrote the real state into the
// stack, so a check would find nothing while the program's values are still
// not back. The last check's findings (status.drift) say what to leave alone.
func (r *StackReconciler) retryRemediate(ctx context.Context, st *reconcileState) (stepResult, error) {
	art, err := r.appliedArtifact(ctx, st.stack)
	if err != nil {
		return stepDone, transient(v1alpha1.ArtifactFailedReason, fmt.Errorf("the program of the last applied revision %s: %w", st.stack.Status.LastAppliedRevision, err))
	}
	_, err = r.remediate(ctx, st, art, driftFilter{Ignored: ignoredFromStatus(st.stack)})
	return stepDone, err
}

// remediate runs `pulumi up --refresh` at the last applied revision and
// inputs, leaving the ignored paths as they are. Only when the program and
// inputs now resolved are the applied ones: otherwise a newer change is
// pending (and failing, or it would have been applied), and an up of the old
// inputs could not be told from a rollback.
func (r *StackReconciler) remediate(ctx context.Context, st *reconcileState, art artifact.Artifact, f driftFilter) (ran bool, err error) {
	stack := st.stack
	if st.programDigest != stack.Status.LastAppliedProgramDigest || st.inputs.Digest != stack.Status.InputsDigest {
		conditions.MarkTrue(stack, v1alpha1.DriftedCondition, v1alpha1.DriftDetectedReason,
			"%s; not remediated yet: the program or the inputs changed since revision %s was applied, and the remediate waits until that change applies",
			driftMessage(stack.Status.Drift), stack.Status.LastAppliedRevision)
		return false, nil
	}
	revision := stack.Status.LastAppliedRevision
	res, err := r.operateWith(ctx, st, runner.OpUp, art, revision, opOptions{
		record: v1alpha1.OperationRemediate, refresh: true, ignoreChanges: f.Ignored,
		// Putting the program's values back means taking back the fields
		// that whoever changed them now owns (a kubectl edit is their field
		// manager): Server-Side Apply with force, for this operation only.
		env: map[string]string{"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"},
	})
	if err != nil {
		return true, err // Ready=False with Pulumi's diagnostic, backoff (decide: ActionRemediate)
	}
	restored := make([]v1alpha1.DriftedResource, 0, len(res.Resources))
	for _, c := range res.Resources {
		if name, typ := urnNameType(c.URN); typ != "pulumi:pulumi:Stack" && typ != "" {
			restored = append(restored, v1alpha1.DriftedResource{URN: c.URN, Type: typ, Name: name, Op: c.Op})
		}
	}
	if h := stack.Status.History; len(h) > 0 && h[0].Type == v1alpha1.OperationRemediate {
		h[0].Resources = driftURNs(restored)
	}
	stack.Status.Outputs, stack.Status.OutputsOmitted = statusOutputs(res.Outputs, stack.Spec.Outputs)
	st.result = res
	if _, err := r.publishOutputs(ctx, st); err != nil {
		return true, err
	}
	msg := fmt.Sprintf("remediated: restored %d resource(s)%s", len(restored), namesSuffix(restored))
	if len(res.Excluded) > 0 {
		msg += fmt.Sprintf("; left alone (ignored, and not expressible as ignoreChanges in this program): %s", strings.Join(res.Excluded[:min(len(res.Excluded), 5)], ", "))
	}
	if stack.Status.Drift != nil {
		stack.Status.Drift.Resources, stack.Status.Drift.Total = nil, 0
	}
	stackDrifted.WithLabelValues(stack.Namespace, stack.Name).Set(0)
	conditions.MarkFalse(stack, v1alpha1.DriftedCondition, v1alpha1.RemediatedReason, "%s at revision %s", msg, revision)
	st.found(finding{kind: foundApplied, message: appliedMessage(stack)})
	r.event(stack, corev1.EventTypeNormal, v1alpha1.RemediatedReason, string(v1alpha1.OperationRemediate), msg+" at revision "+revision)
	return true, nil
}
