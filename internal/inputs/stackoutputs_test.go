package inputs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// publishedSecret is what the publisher (the controller's publishOutputs)
// writes for outputs, written out here so that the reader's side pins the
// format: strings as they are, other values as JSON text, annotations naming
// the JSON and the secret outputs, controlled by owner.
func publishedSecret(owner *v1alpha1.Stack, name string, outputs map[string]runner.Output) *corev1.Secret {
	data := map[string][]byte{}
	var secret, jsonOut []string
	for _, k := range slices.Sorted(maps.Keys(outputs)) {
		o := outputs[k]
		if s, ok := o.Value.(string); ok {
			data[k] = []byte(s)
		} else {
			raw, _ := json.Marshal(o.Value)
			data[k] = raw
			jsonOut = append(jsonOut, k)
		}
		if o.Secret {
			secret = append(secret, k)
		}
	}
	yes := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: name,
			Annotations: map[string]string{
				v1alpha1.SecretOutputsAnnotation: strings.Join(secret, ","),
				v1alpha1.JSONOutputsAnnotation:   strings.Join(jsonOut, ","),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Stack", Name: owner.Name, UID: owner.UID, Controller: &yes}}},
		Data: data,
	}
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
	g.Expect(serror.ReasonOf(err, "")).To(Equal(v1alpha1.InputsNotFoundReason))
	g.Expect(err.Error()).To(ContainSubstring(`Stack net has no output "nope" (its outputs: cidr, count, looks, network, token)`))

	_, err = outputConfigValues("f", "net", sec, []v1alpha1.OutputKey{{Output: "cidr", As: "not a key"}})
	var st *serror.StallingError
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
	r := &Resolver{Client: c, DefaultBackend: "file:///d", DigestKey: testKey}
	down := stackFixture()
	down.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{
		Name: "network", Keys: []v1alpha1.OutputKey{{Output: "cidr", As: "networkCidr"}, {Output: "token"}},
	}}}

	in, err := r.Resolve(ctx, down)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Config).To(ContainElements(
		runner.ConfigValue{Key: "networkCidr", Value: "10.0.0.0/16"},
		runner.ConfigValue{Key: "token", Value: "t0ken-9876", Secret: true}))
	g.Expect(in.Secrets).To(ContainElement("t0ken-9876"))
	g.Expect(in.Secrets).NotTo(ContainElement("10.0.0.0/16"))

	outputs.Data["cidr"] = []byte("10.1.0.0/16")
	g.Expect(c.Update(ctx, outputs)).To(Succeed())
	changed, err := r.Resolve(ctx, down)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed.Digest).NotTo(Equal(in.Digest), "the upstream's outputs are part of the inputs")

	// A Secret of that name that the upstream does not control is no output of it.
	outputs.OwnerReferences = nil
	g.Expect(c.Update(ctx, outputs)).To(Succeed())
	_, err = r.Resolve(ctx, down)
	g.Expect(serror.ReasonOf(err, "")).To(Equal(v1alpha1.InputsNotFoundReason))
	g.Expect(err.Error()).To(ContainSubstring("is not controlled by Stack network"))

	// An upstream that publishes no Secret.
	up.Spec.Outputs = &v1alpha1.OutputsTarget{ConfigMapName: "network-outputs"}
	g.Expect(c.Update(ctx, up)).To(Succeed())
	_, err = r.Resolve(ctx, down)
	var w *serror.WaitingError
	g.Expect(errors.As(err, &w)).To(BeTrue(), "%v", err)
	g.Expect(w.Reason).To(Equal(v1alpha1.InputsNotFoundReason))
	g.Expect(err.Error()).To(ContainSubstring("set spec.outputs.secretName on Stack network"))

	// Another namespace needs the flag.
	down.Spec.ConfigFrom[0].StackOutputs.Namespace = "elsewhere"
	_, err = r.Resolve(ctx, down)
	g.Expect(serror.ReasonOf(err, "")).To(Equal(v1alpha1.CrossNamespaceRefNotAllowedReason))
	r.AllowCrossNamespace = true
	_, err = r.Resolve(ctx, down)
	g.Expect(err.Error()).To(ContainSubstring("Stack elsewhere/network not found"))

	// The data keys of configMapRef and secretRef are not the outputs' keys.
	down.Spec.ConfigFrom[0].Keys = []string{"cidr"}
	_, err = r.Resolve(ctx, down)
	g.Expect(serror.ReasonOf(err, "")).To(Equal(v1alpha1.InvalidSpecReason))
	g.Expect(err.Error()).To(ContainSubstring("stackOutputs.keys"))
}
