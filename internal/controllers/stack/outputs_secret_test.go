package stack

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// publishedSecret is what publishOutputs writes for outputs: the data and the
// annotations, controlled by owner.
func publishedSecret(owner *v1alpha1.Stack, name string, outputs map[string]runner.Output) *corev1.Secret {
	all, _ := outputData(outputs)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: name}, Data: bytesMap(all)}
	setOutputAnnotations(sec, outputs)
	yes := true
	sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Stack", Name: owner.Name, UID: owner.UID, Controller: &yes}}
	return sec
}

func TestSetOutputAnnotations(t *testing.T) {
	g := NewWithT(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"keep": "me"}}}
	setOutputAnnotations(sec, map[string]runner.Output{
		"b": {Value: "x", Secret: true}, "a": {Value: map[string]any{"k": 1.0}, Secret: true},
		"c": {Value: 3.0}, "d": {Value: "plain"},
	})
	g.Expect(sec.Annotations).To(Equal(map[string]string{
		"keep":                           "me",
		v1alpha1.SecretOutputsAnnotation: "a,b",
		v1alpha1.JSONOutputsAnnotation:   "a,c",
	}))
	setOutputAnnotations(sec, map[string]runner.Output{"d": {Value: "plain"}})
	g.Expect(sec.Annotations).To(HaveKeyWithValue(v1alpha1.SecretOutputsAnnotation, ""), "present, and empty: no output is secret")
}

// TestOutputsDriftWithoutAnnotations: an outputs Secret published before the
// annotations existed is published again (from the stack's state), so that
// downstream Stacks learn which outputs are secret and which are JSON.
func TestOutputsDriftWithoutAnnotations(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "network", UID: "u"},
		Spec: v1alpha1.StackSpec{Outputs: &v1alpha1.OutputsTarget{SecretName: "network-outputs"}}}
	outputs := map[string]runner.Output{"cidr": {Value: "10.0.0.0/16"}, "token": {Value: "t", Secret: true}}
	stack.Status.Outputs, _ = statusOutputs(outputs, stack.Spec.Outputs)
	sec := publishedSecret(stack, "network-outputs", outputs)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sec).Build()
	r := &StackReconciler{Client: c, APIReader: c}

	drift, err := r.outputsDrift(ctx, stack)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drift).To(BeEmpty(), "as the publisher writes it")

	delete(sec.Annotations, v1alpha1.SecretOutputsAnnotation)
	g.Expect(c.Update(ctx, sec)).To(Succeed())
	drift, err = r.outputsDrift(ctx, stack)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drift).To(Equal("outputs Secret network-outputs has no stackpilot.dev/secret-outputs annotation"))
}
