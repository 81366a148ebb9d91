package controller

import (
	"context"
	"encoding/json"
	"errors"
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

// TestOutputConfigValues: each output comes back as Pulumi gave it: a string
// as a string (even one that looks like JSON), an object or a number as
// JSON, exactly; a secret one as secret config.
func TestOutputConfigValues(t *testing.T) {
	g := NewWithT(t)
	up := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "net", UID: "u"}}
	sec := publishedSecret(up, "net-outputs", map[string]runner.Output{
		"cidr":    {Value: "10.0.0.0/16"},
		"looks":   {Value: `{"a":1}`},
		"count":   {Value: json.Number("12345678901234567890")},
		"network": {Value: map[string]any{"subnets": []any{"a", "b"}}},
		"token":   {Value: "s3cr3t", Secret: true},
	})

	all, err := outputConfigValues("f", "net", sec, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(Equal([]runner.ConfigValue{
		{Key: "cidr", Value: "10.0.0.0/16"},
		{Key: "count", Value: json.Number("12345678901234567890")},
		{Key: "looks", Value: `{"a":1}`},
		{Key: "network", Value: map[string]any{"subnets": []any{"a", "b"}}},
		{Key: "token", Value: "s3cr3t", Secret: true},
	}))

	some, err := outputConfigValues("f", "net", sec, []v1alpha1.OutputKey{{Output: "cidr", As: "net:cidr"}, {Output: "token"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(some).To(Equal([]runner.ConfigValue{{Key: "net:cidr", Value: "10.0.0.0/16"}, {Key: "token", Value: "s3cr3t", Secret: true}}))

	_, err = outputConfigValues("f", "net", sec, []v1alpha1.OutputKey{{Output: "nope"}})
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.InputsNotFoundReason))
	g.Expect(err.Error()).To(ContainSubstring(`Stack net has no output "nope" (its outputs: cidr, count, looks, network, token)`))

	_, err = outputConfigValues("f", "net", sec, []v1alpha1.OutputKey{{Output: "cidr", As: "not a key"}})
	var st *StallingError
	g.Expect(errors.As(err, &st)).To(BeTrue())
	g.Expect(st.Reason).To(Equal(v1alpha1.InvalidSpecReason))

	_, err = outputConfigValues("f", "net", sec, []v1alpha1.OutputKey{{Output: "cidr", As: "x"}, {Output: "token", As: "x"}})
	g.Expect(errors.As(err, &st)).To(BeTrue(), "two outputs under one key")

	// A Secret without the annotations (an older controller's): every value
	// is taken for a secret string.
	sec.Annotations = nil
	old, err := outputConfigValues("f", "net", sec, []v1alpha1.OutputKey{{Output: "cidr"}, {Output: "network"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(old).To(Equal([]runner.ConfigValue{
		{Key: "cidr", Value: "10.0.0.0/16", Secret: true},
		{Key: "network", Value: `{"subnets":["a","b"]}`, Secret: true},
	}))
}

// TestResolveStackOutputs: configFrom stackOutputs through resolve: the
// values land in the config, the secret ones in the scrub list, and a
// changed output changes the inputs digest; an upstream not yet publishing
// keeps the Stack waiting with what to do.
func TestResolveStackOutputs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)

	up := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "network", UID: "uid-network"},
		Spec: v1alpha1.StackSpec{Outputs: &v1alpha1.OutputsTarget{SecretName: "network-outputs"}}}
	outputs := publishedSecret(up, "network-outputs", map[string]runner.Output{
		"cidr": {Value: "10.0.0.0/16"}, "token": {Value: "t0ken-9876", Secret: true},
	})
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret("pass", map[string]string{"passphrase": "pw-123456"}), up, outputs).Build()
	r := &inputsResolver{client: c, defaultBackend: "file:///d", digestKey: testKey}
	down := stackFixture()
	down.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{
		Name: "network", Keys: []v1alpha1.OutputKey{{Output: "cidr", As: "networkCidr"}, {Output: "token"}},
	}}}

	in, err := r.resolve(ctx, down)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Config).To(ContainElements(
		runner.ConfigValue{Key: "networkCidr", Value: "10.0.0.0/16"},
		runner.ConfigValue{Key: "token", Value: "t0ken-9876", Secret: true}))
	g.Expect(in.secrets).To(ContainElement("t0ken-9876"))
	g.Expect(in.secrets).NotTo(ContainElement("10.0.0.0/16"))

	outputs.Data["cidr"] = []byte("10.1.0.0/16")
	g.Expect(c.Update(ctx, outputs)).To(Succeed())
	changed, err := r.resolve(ctx, down)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed.Digest).NotTo(Equal(in.Digest), "the upstream's outputs are part of the inputs")

	// A Secret of that name that the upstream does not control is no output of it.
	outputs.OwnerReferences = nil
	g.Expect(c.Update(ctx, outputs)).To(Succeed())
	_, err = r.resolve(ctx, down)
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.InputsNotFoundReason))
	g.Expect(err.Error()).To(ContainSubstring("is not controlled by Stack network"))

	// An upstream that publishes no Secret.
	up.Spec.Outputs = &v1alpha1.OutputsTarget{ConfigMapName: "network-outputs"}
	g.Expect(c.Update(ctx, up)).To(Succeed())
	_, err = r.resolve(ctx, down)
	var w *WaitingError
	g.Expect(errors.As(err, &w)).To(BeTrue(), "%v", err)
	g.Expect(w.Reason).To(Equal(v1alpha1.InputsNotFoundReason))
	g.Expect(err.Error()).To(ContainSubstring("set spec.outputs.secretName on Stack network"))

	// Another namespace needs the flag.
	down.Spec.ConfigFrom[0].StackOutputs.Namespace = "elsewhere"
	_, err = r.resolve(ctx, down)
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.CrossNamespaceRefNotAllowedReason))
	r.allowCrossNamespace = true
	_, err = r.resolve(ctx, down)
	g.Expect(err.Error()).To(ContainSubstring("Stack elsewhere/network not found"))

	// The data keys of configMapRef and secretRef are not the outputs' keys.
	down.Spec.ConfigFrom[0].Keys = []string{"cidr"}
	_, err = r.resolve(ctx, down)
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.InvalidSpecReason))
	g.Expect(err.Error()).To(ContainSubstring("stackOutputs.keys"))
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
