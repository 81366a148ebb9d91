package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// restoreOutputs runs when there is nothing to apply (the last step of
// ActionNone and ActionSkip: route.go). It retries a failed publish when its
// backoff is due, and otherwise checks that the outputs Secret and ConfigMap
// still hold what the last up published, restoring them when someone deleted
// or edited them, as Flux corrects drift of what it applied at each interval.
// The values, secret ones included, are read from the stack's state
// (runner.OpOutputs): no up, no change to the stack.
func (r *StackReconciler) restoreOutputs(ctx context.Context, st *reconcileState) (stepResult, error) {
	stack := st.stack
	if stack.Spec.Outputs == nil {
		forgetOutputsPublished(stack)
		return stepDone, nil
	}
	if stack.Status.LastAppliedArtifact == nil {
		return stepDone, nil
	}
	if c := conditions.Get(stack, v1alpha1.OutputsPublishedCondition); c != nil && c.Status == metav1.ConditionFalse {
		if wait := publishRetryWait(stack, time.Now()); wait > 0 && !isRequested(stack) {
			return stepDone, &WaitingError{Reason: c.Reason, Err: errors.New(c.Message), RequeueAfter: wait}
		}
		return r.republish(ctx, st, fmt.Sprintf("retrying the failed publish (attempt %d)", stack.Status.OutputsPublishFailures+1))
	}
	drift, err := r.outputsDrift(ctx, stack)
	if err != nil {
		return stepDone, transient(v1alpha1.OperationFailedReason, fmt.Errorf("check the published outputs: %w", err))
	}
	if drift == "" {
		if conditions.Get(stack, v1alpha1.OutputsPublishedCondition) == nil {
			markOutputsPublished(stack) // published before the condition existed
		}
		return stepDone, nil
	}
	return r.republish(ctx, st, drift)
}

// publishRetryWait is how long a failed publish still waits for its retry. A
// spec changed since the failure (say, spec.outputs names another Secret) is
// tried at once, as new inputs are.
func publishRetryWait(stack *v1alpha1.Stack, now time.Time) time.Duration {
	last := stack.Status.LastOutputsPublishAttempt
	if last == nil {
		return 0
	}
	if c := conditions.Get(stack, v1alpha1.OutputsPublishedCondition); c != nil && c.ObservedGeneration != stack.Generation {
		return 0
	}
	due := last.Add(backoff(stack.Status.OutputsPublishFailures, stack.GetRetryInterval(), stack.GetRequeueAfter()))
	return max(due.Sub(now), 0)
}

// republish reads the outputs from the stack's state and writes them again.
// Any failure is a publish failure (OutputsPublished=False, backoff).
func (r *StackReconciler) republish(ctx context.Context, st *reconcileState, why string) (stepResult, error) {
	stack := st.stack
	art, err := r.appliedArtifact(ctx, stack)
	if err != nil {
		return stepDone, r.publishFailed(st, transient(v1alpha1.PublishFailedReason, fmt.Errorf("%s: %w", why, err)))
	}
	res := r.execute(ctx, st, newOperationID(runner.OpOutputs), runner.OpOutputs, art, opOptions{})
	operationsTotal.WithLabelValues(string(runner.OpOutputs), string(res.Outcome)).Inc()
	if res.Outcome != runner.OutcomeSucceeded {
		msg := boundMessage(scrub(res.Message, st.inputs.Secrets), 2000)
		return stepDone, r.publishFailed(st, transient(v1alpha1.PublishFailedReason,
			fmt.Errorf("%s: reading the outputs from the stack's state failed: %s", why, msg)))
	}
	if err := r.writeOutputs(ctx, stack, res.Outputs); err != nil {
		return stepDone, r.publishFailed(st, err)
	}
	markOutputsPublished(stack)
	r.recordf(stack, corev1.EventTypeNormal, "OutputsRestored", "RestoreOutputs", "%s; restored from the stack's state", why)
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
	// The ConfigMap holds the non-secret outputs: those with a value in the
	// status and those too large to show there.
	omitted := int(stack.Status.OutputsOmitted)
	shownPublic := map[string]struct{}{}
	for k, raw := range stack.Status.Outputs {
		if raw != v1alpha1.SecretOutputValue {
			shownPublic[k] = struct{}{}
		}
	}
	if name := target.SecretName; name != "" {
		sec := &corev1.Secret{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, sec); {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("outputs Secret %s is missing", name), nil
		case err != nil:
			return "", err
		}
		if _, ok := sec.Annotations[v1alpha1.SecretOutputsAnnotation]; !ok {
			// Published before the annotations existed: a downstream Stack
			// would take every value for a secret string.
			return fmt.Sprintf("outputs Secret %s has no %s annotation", name, v1alpha1.SecretOutputsAnnotation), nil
		}
		if !sameKeys(sortedKeys(sec.Data), sortedKeys(all), omitted, omitted) {
			return fmt.Sprintf("outputs Secret %s has keys %v, not %v", name, boundKeys(sortedKeys(sec.Data)), boundKeys(sortedKeys(all))), nil
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
		if len(cm.BinaryData) > 0 || !sameKeys(sortedKeys(cm.Data), sortedKeys(shownPublic), 0, omitted) {
			return fmt.Sprintf("outputs ConfigMap %s was changed", name), nil
		}
		for k, v := range public {
			if cm.Data[k] != v {
				return fmt.Sprintf("outputs ConfigMap %s: %s was changed", name, k), nil
			}
		}
	}
	return "", nil
}

// sameKeys: published holds exactly the keys of status, plus between minExtra
// and maxExtra more when outputs were left out of the status (outputsOmitted).
func sameKeys(published, status []string, minExtra, maxExtra int) bool {
	if maxExtra == 0 {
		return slices.Equal(published, status)
	}
	if extra := len(published) - len(status); extra < minExtra || extra > maxExtra {
		return false
	}
	for _, k := range status {
		if _, found := slices.BinarySearch(published, k); !found {
			return false
		}
	}
	return true
}

// publishedFromStatus turns status.outputs (JSON values, secret ones shown as
// [secret]) back into what publishOutputs wrote: all keys, and the rendered
// values of the non-secret ones.
func publishedFromStatus(outputs map[string]string) (all map[string]struct{}, public map[string]string, err error) {
	all, public = map[string]struct{}{}, map[string]string{}
	for k, raw := range outputs {
		all[k] = struct{}{}
		if raw == v1alpha1.SecretOutputValue || strings.HasPrefix(raw, v1alpha1.OmittedOutputPrefix) {
			continue // the value is not in the status: only its key is checked
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, nil, fmt.Errorf("status.outputs.%s is not JSON: %w", k, err)
		}
		public[k] = renderOutput(v)
	}
	return all, public, nil
}
