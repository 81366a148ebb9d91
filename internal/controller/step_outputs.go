package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// publishOutputs writes the stack outputs of a successful up to the Secret (all
// of them) and the ConfigMap (non-secret ones) named in spec.outputs, replaced
// whole, owned by the Stack: the gitops-bridge for tools that read plain objects.
func (r *StackReconciler) publishOutputs(ctx context.Context, st *reconcileState) (stepResult, error) {
	target := st.stack.Spec.Outputs
	if st.result == nil || target == nil {
		return stepContinue, nil
	}
	all, public := outputData(st.result.Outputs)
	if target.SecretName != "" {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: target.SecretName, Namespace: st.stack.Namespace}}
		if err := r.writeOwned(ctx, st.stack, sec, func() { sec.Data = bytesMap(all); sec.StringData = nil }); err != nil {
			return r.outputsFailed(st, "Secret", target.SecretName, err)
		}
	}
	if target.ConfigMapName != "" {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: target.ConfigMapName, Namespace: st.stack.Namespace}}
		if err := r.writeOwned(ctx, st.stack, cm, func() { cm.Data = public; cm.BinaryData = nil }); err != nil {
			return r.outputsFailed(st, "ConfigMap", target.ConfigMapName, err)
		}
	}
	return stepContinue, nil
}

// outputsFailed makes the next reconcile run the up again: its outputs are the
// only source of the values to publish.
func (r *StackReconciler) outputsFailed(st *reconcileState, kind, name string, err error) (stepResult, error) {
	st.stack.Status.LastAttemptedInputsDigest = ""
	return stepDone, transient(v1alpha1.OperationFailedReason, fmt.Errorf("publish outputs to %s %s: %w", kind, name, err))
}

// writeOwned creates or replaces obj, refusing to take over an object that some
// other owner controls.
func (r *StackReconciler) writeOwned(ctx context.Context, stack *v1alpha1.Stack, obj client.Object, set func()) error {
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
		if owner := metav1.GetControllerOf(obj); owner != nil && owner.UID != stack.UID {
			return fmt.Errorf("it is controlled by %s %s, not by this Stack", owner.Kind, owner.Name)
		}
		set()
		return controllerutil.SetControllerReference(stack, obj, r.Scheme())
	})
	return err
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

// statusOutputs is what status shows: compact JSON, secrets as "[secret]".
func statusOutputs(outputs map[string]runner.Output) map[string]string {
	if len(outputs) == 0 {
		return nil
	}
	out := make(map[string]string, len(outputs))
	for k, o := range outputs {
		if o.Secret {
			out[k] = v1alpha1.SecretOutputValue
			continue
		}
		raw, err := json.Marshal(o.Value)
		if err != nil {
			raw = []byte(fmt.Sprintf("%q", fmt.Sprint(o.Value)))
		}
		out[k] = string(raw)
	}
	return out
}

func bytesMap(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}
