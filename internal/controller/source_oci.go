package controller

import (
	"context"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
)

func (r *StackReconciler) resolveOCI(ctx context.Context, st *reconcileState) error {
	return stalling(v1alpha1.InvalidSpecReason, "spec.source.oci is not supported by this controller yet")
}

func (r *StackReconciler) ociFetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error) {
	return artifact.Artifact{}, stalling(v1alpha1.InvalidSpecReason, "spec.source.oci is not supported by this controller yet")
}
