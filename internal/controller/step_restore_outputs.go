package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// restoreOutputs runs when there is nothing to apply: it checks that the
// outputs Secret and ConfigMap still hold what the last up published, and
// restores them when someone deleted or edited them, as Flux corrects drift of
// what it applied at each interval. The values, secret ones included, are read
// from the stack's state (runner.OpOutputs): no up, no change to the stack.
func (r *StackReconciler) restoreOutputs(ctx context.Context, st *reconcileState) (stepResult, error) {
	if st.decision.Action != ActionNone {
		return stepContinue, nil
	}
	stack := st.stack
	if stack.Spec.Outputs == nil || stack.Status.LastAppliedArtifact == nil {
		return stepDone, nil
	}
	drift, err := r.outputsDrift(ctx, stack)
	if err != nil {
		return stepDone, transient(v1alpha1.OperationFailedReason, fmt.Errorf("check the published outputs: %w", err))
	}
	if drift == "" {
		return stepDone, nil
	}
	art, err := r.appliedArtifact(ctx, stack)
	if err != nil {
		return stepDone, transient(v1alpha1.OperationFailedReason, fmt.Errorf("restore outputs (%s): %w", drift, err))
	}
	res := r.execute(ctx, st, newOperationID(runner.OpOutputs), runner.OpOutputs, art)
	operationsTotal.WithLabelValues(string(runner.OpOutputs), string(res.Outcome)).Inc()
	if res.Outcome != runner.OutcomeSucceeded {
		msg := truncate(scrub(res.Message, st.inputs.secrets), 2000)
		return stepDone, transient(failureReason(res.ErrorClass), fmt.Errorf("restore outputs (%s): reading them from the stack failed: %s", drift, msg))
	}
	st.result = res
	if _, err := r.publishOutputs(ctx, st); err != nil {
		return stepDone, err
	}
	r.recordf(stack, corev1.EventTypeNormal, "OutputsRestored", "RestoreOutputs", "%s; restored from the stack's state", drift)
	return stepDone, nil
}

// outputsDrift says how the published outputs differ from the last up's
// (status.outputs), or "" when they do not: an object is missing, or its keys
// or non-secret values differ. Secret values are not in the status, so a
// changed secret value goes unnoticed; its key set is still checked.
func (r *StackReconciler) outputsDrift(ctx context.Context, stack *v1alpha1.Stack) (string, error) {
	target := stack.Spec.Outputs
	all, public, err := publishedFromStatus(stack.Status.Outputs)
	if err != nil {
		return "", err
	}
	if name := target.SecretName; name != "" {
		sec := &corev1.Secret{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, sec); {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("outputs Secret %s is missing", name), nil
		case err != nil:
			return "", err
		}
		if !slices.Equal(sortedKeys(sec.Data), sortedKeys(all)) {
			return fmt.Sprintf("outputs Secret %s has keys %v, not %v", name, sortedKeys(sec.Data), sortedKeys(all)), nil
		}
		for k, v := range public {
			if string(sec.Data[k]) != v {
				return fmt.Sprintf("outputs Secret %s: %s was changed", name, k), nil
			}
		}
	}
	if name := target.ConfigMapName; name != "" {
		cm := &corev1.ConfigMap{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, cm); {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("outputs ConfigMap %s is missing", name), nil
		case err != nil:
			return "", err
		}
		if !maps.Equal(cm.Data, public) || len(cm.BinaryData) > 0 {
			return fmt.Sprintf("outputs ConfigMap %s was changed", name), nil
		}
	}
	return "", nil
}

// publishedFromStatus turns status.outputs (JSON values, secret ones shown as
// [secret]) back into what publishOutputs wrote: all keys, and the rendered
// values of the non-secret ones.
func publishedFromStatus(outputs map[string]string) (all map[string]struct{}, public map[string]string, err error) {
	all, public = map[string]struct{}{}, map[string]string{}
	for k, raw := range outputs {
		all[k] = struct{}{}
		if raw == v1alpha1.SecretOutputValue {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, nil, fmt.Errorf("status.outputs.%s is not JSON: %w", k, err)
		}
		public[k] = renderOutput(v)
	}
	return all, public, nil
}
