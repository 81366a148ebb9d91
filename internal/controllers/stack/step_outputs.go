package stack

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
	// Both objects are read and checked before either is written: a refusal
	// of one leaves the other as it was, too.
	var writes []outputsWrite
	if target.SecretName != "" {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: target.SecretName, Namespace: stack.Namespace}}
		writes = append(writes, outputsWrite{kind: "Secret", obj: sec, set: func() {
			sec.Data = bytesMap(all)
			sec.StringData = nil
			setOutputAnnotations(sec, outputs)
		}})
	}
	if target.ConfigMapName != "" {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: target.ConfigMapName, Namespace: stack.Namespace}}
		writes = append(writes, outputsWrite{kind: "ConfigMap", obj: cm, set: func() { cm.Data = public; cm.BinaryData = nil }})
	}
	for i := range writes {
		if err := r.loadOutputsTarget(ctx, stack, &writes[i]); err != nil {
			return publishError(writes[i].kind, writes[i].obj.GetName(), err)
		}
	}
	for _, w := range writes {
		if err := r.writeOwned(ctx, stack, w); err != nil {
			return publishError(w.kind, w.obj.GetName(), err)
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

// outputsWrite is one outputs object to write: set fills in its data.
type outputsWrite struct {
	kind   string
	obj    client.Object
	set    func()
	exists bool
}

// loadOutputsTarget reads the object w names and refuses it unless this
// Stack may write it (mayWriteOutputs). It reads through the API reader, not
// the cache: a typed Get of a Secret on the cached client would start a
// cluster-wide Secret informer and keep every Secret's data in memory.
func (r *StackReconciler) loadOutputsTarget(ctx context.Context, stack *v1alpha1.Stack, w *outputsWrite) error {
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(w.obj), w.obj)
	switch {
	case apierrors.IsNotFound(err):
		w.exists = false
		return nil
	case err != nil:
		return err
	}
	w.exists = true
	return mayWriteOutputs(stack, w.kind, w.obj)
}

// writeOwned creates the object of w, controlled by the Stack, or replaces
// the data of the one loadOutputsTarget found and allowed. A create that
// finds the object made meanwhile fails (AlreadyExists) rather than take it
// over; an update carries the resourceVersion that was checked, so an object
// changed since is not overwritten either. Writes never go to the cache.
func (r *StackReconciler) writeOwned(ctx context.Context, stack *v1alpha1.Stack, w outputsWrite) error {
	if !w.exists {
		w.set()
		if err := controllerutil.SetControllerReference(stack, w.obj, r.Scheme()); err != nil {
			return err
		}
		return r.Create(ctx, w.obj)
	}
	before := w.obj.DeepCopyObject()
	w.set()
	if err := controllerutil.SetControllerReference(stack, w.obj, r.Scheme()); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before, w.obj) {
		return nil
	}
	return r.Update(ctx, w.obj)
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
