package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// publishOutputs writes the stack outputs of a successful up to the Secret (all
// of them) and the ConfigMap (non-secret ones) named in spec.outputs, replaced
// whole, owned by the Stack: the gitops-bridge for tools that read plain objects.
// A failure is the OutputsPublished condition's, with a backoff of its own:
// the up is applied and is not run again; restoreOutputs retries the publish
// from the stack's state.
func (r *StackReconciler) publishOutputs(ctx context.Context, st *reconcileState) (stepResult, error) {
	if st.result == nil {
		return stepContinue, nil
	}
	if st.stack.Spec.Outputs == nil {
		forgetOutputsPublished(st.stack)
		return stepContinue, nil
	}
	if err := r.writeOutputs(ctx, st.stack, st.result.Outputs); err != nil {
		return stepDone, r.publishFailed(st, err)
	}
	markOutputsPublished(st.stack)
	return stepContinue, nil
}

// writeOutputs checks that the outputs fit in the Secret and the ConfigMap
// before writing either, so that no half-published state is left.
func (r *StackReconciler) writeOutputs(ctx context.Context, stack *v1alpha1.Stack, outputs map[string]runner.Output) error {
	target := stack.Spec.Outputs
	all, public := outputData(outputs)
	if target.SecretName != "" {
		if err := fitsInObject("Secret", target.SecretName, all); err != nil {
			return err
		}
	}
	if target.ConfigMapName != "" {
		if err := fitsInObject("ConfigMap", target.ConfigMapName, public); err != nil {
			return err
		}
	}
	if target.SecretName != "" {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: target.SecretName, Namespace: stack.Namespace}}
		if err := r.writeOwned(ctx, stack, "Secret", sec, func() {
			sec.Data = bytesMap(all)
			sec.StringData = nil
			setOutputAnnotations(sec, outputs)
		}); err != nil {
			return publishError("Secret", target.SecretName, err)
		}
	}
	if target.ConfigMapName != "" {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: target.ConfigMapName, Namespace: stack.Namespace}}
		if err := r.writeOwned(ctx, stack, "ConfigMap", cm, func() { cm.Data = public; cm.BinaryData = nil }); err != nil {
			return publishError("ConfigMap", target.ConfigMapName, err)
		}
	}
	return nil
}

func publishError(kind, name string, err error) error {
	if _, ok := outermostTyped(err).(*TransientError); ok {
		return err
	}
	return transient(v1alpha1.PublishFailedReason, fmt.Errorf("write the outputs %s %s: %w", kind, name, err))
}

// publishFailed records a failed publish in OutputsPublished and its own
// counter, and backs off; Ready says why (summarize). The up's results
// (lastAppliedRevision, inputsDigest) stay recorded: it is not run again.
func (r *StackReconciler) publishFailed(st *reconcileState, err error) error {
	stack := st.stack
	reason := reasonOf(err, v1alpha1.PublishFailedReason)
	msg := boundMessage(scrubMsg(st, err.Error()), maxConditionMessage)
	stack.Status.OutputsPublishFailures++
	now := metav1.Now()
	stack.Status.LastOutputsPublishAttempt = &now
	conditions.MarkFalse(stack, v1alpha1.OutputsPublishedCondition, reason, "%s", msg)
	st.requeueAfter = backoff(stack.Status.OutputsPublishFailures, stack.GetRetryInterval(), stack.GetRequeueAfter())
	r.event(stack, corev1.EventTypeWarning, reason, "PublishOutputs", msg)
	return transient(reason, fmt.Errorf("publish outputs (attempt %d, retried from the stack's state in %s): %w",
		stack.Status.OutputsPublishFailures, st.requeueAfter, err))
}

// markOutputsPublished ends a publish failure, if any.
func markOutputsPublished(stack *v1alpha1.Stack) {
	var where []string
	if n := stack.Spec.Outputs.SecretName; n != "" {
		where = append(where, "Secret "+n)
	}
	if n := stack.Spec.Outputs.ConfigMapName; n != "" {
		where = append(where, "ConfigMap "+n)
	}
	conditions.MarkTrue(stack, v1alpha1.OutputsPublishedCondition, v1alpha1.PublishedReason,
		"Outputs published to %s", strings.Join(where, " and "))
	stack.Status.OutputsPublishFailures = 0
	stack.Status.LastOutputsPublishAttempt = nil
}

// forgetOutputsPublished drops the publish state of a Stack without spec.outputs.
func forgetOutputsPublished(stack *v1alpha1.Stack) {
	conditions.Delete(stack, v1alpha1.OutputsPublishedCondition)
	stack.Status.OutputsPublishFailures = 0
	stack.Status.LastOutputsPublishAttempt = nil
}

// writeOwned creates or replaces obj, refusing to take over an object that some
// other owner controls. It reads through the API reader, not the cache: a
// typed Get of a Secret on the cached client would start a cluster-wide Secret
// informer and keep every Secret's data in memory. Writes never go to the cache.
func (r *StackReconciler) writeOwned(ctx context.Context, stack *v1alpha1.Stack, kind string, obj client.Object, set func()) error {
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		set()
		if err := controllerutil.SetControllerReference(stack, obj, r.Scheme()); err != nil {
			return err
		}
		return r.Create(ctx, obj)
	case err != nil:
		return err
	}
	if owner := metav1.GetControllerOf(obj); owner != nil && owner.UID != stack.UID {
		return transient(v1alpha1.OutputsConflictReason, fmt.Errorf(
			"the outputs %s %s is controlled by %s %s, not by this Stack: name another object in spec.outputs, or delete that one",
			kind, obj.GetName(), owner.Kind, owner.Name))
	}
	before := obj.DeepCopyObject()
	set()
	if err := controllerutil.SetControllerReference(stack, obj, r.Scheme()); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	return r.Update(ctx, obj)
}

// outputData renders outputs as strings: strings as they are, anything else as
// compact JSON. public leaves out the secret ones.
func outputData(outputs map[string]runner.Output) (all, public map[string]string) {
	all, public = map[string]string{}, map[string]string{}
	for k, o := range outputs {
		v := renderOutput(o.Value)
		all[k] = v
		if !o.Secret {
			public[k] = v
		}
	}
	return all, public
}

func renderOutput(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// setOutputAnnotations says on the outputs Secret which outputs are secret and
// which are JSON text (v1alpha1.SecretOutputsAnnotation, JSONOutputsAnnotation),
// so that a downstream Stack reads each value back as Pulumi gave it, secret
// ones as secret config. Other annotations on the Secret are left alone.
func setOutputAnnotations(sec *corev1.Secret, outputs map[string]runner.Output) {
	var secret, structured []string
	for k, o := range outputs {
		if o.Secret {
			secret = append(secret, k)
		}
		if _, ok := o.Value.(string); !ok {
			structured = append(structured, k)
		}
	}
	sort.Strings(secret)
	sort.Strings(structured)
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[v1alpha1.SecretOutputsAnnotation] = strings.Join(secret, ",")
	sec.Annotations[v1alpha1.JSONOutputsAnnotation] = strings.Join(structured, ",")
}

func bytesMap(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}
