package controller

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestNamespacedBackend(t *testing.T) {
	g := NewWithT(t)
	g.Expect(namespacedBackend("file:///data/state/{namespace}", "team-a")).To(Equal("file:///data/state/team-a"))
	g.Expect(namespacedBackend("file:///data/state", "team-a")).To(Equal("file:///data/state/team-a"))
	g.Expect(namespacedBackend("s3://bucket/prefix/", "team-b")).To(Equal("s3://bucket/prefix/team-b"))
	g.Expect(namespacedBackend("https://api.pulumi.com", "team-b")).To(Equal("https://api.pulumi.com"))
	g.Expect(namespacedBackend("file:///s", "a")).NotTo(Equal(namespacedBackend("file:///s", "b")),
		"two namespaces never share the default backend")
}

func stackFixture() *v1alpha1.Stack {
	return &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "net", Namespace: "infra"},
		Spec: v1alpha1.StackSpec{
			Source:          v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://example.com/r.git"}},
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: "pass"}},
			Config:          map[string]apiextensionsv1.JSON{"tags": {Raw: []byte(`{"team":"a"}`)}, "replicas": {Raw: []byte(`3`)}},
			ConfigFrom:      []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "creds"}}},
		},
	}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "infra"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestResolveInputs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objs := []*corev1.Secret{secret("pass", map[string]string{"passphrase": "pw-123456"}), secret("creds", map[string]string{"apiKey": "k-987654"})}
	c := fake.NewClientBuilder().WithObjects(objs[0], objs[1]).Build()
	r := &inputsResolver{client: c, defaultBackend: "file:///data/state/{namespace}"}

	in, err := r.resolve(ctx, stackFixture())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Backend).To(Equal("file:///data/state/infra"))
	g.Expect(in.Env).To(HaveKeyWithValue("PULUMI_CONFIG_PASSPHRASE", "pw-123456"))
	g.Expect(in.Config).To(HaveLen(3))
	g.Expect(in.Config[0].Key).To(Equal("apiKey"))
	g.Expect(in.Config[0].Secret).To(BeTrue(), "values from Secrets are Pulumi secrets")
	g.Expect(in.Config[2].Value).To(Equal(map[string]any{"team": "a"}), "structured config stays structured")
	g.Expect(in.secrets).To(ContainElements("pw-123456", "k-987654"))
	g.Expect(in.Digest).To(HavePrefix("sha256:"))
	g.Expect(in.Digest).NotTo(ContainSubstring("k-987654"))

	again, err := r.resolve(ctx, stackFixture())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Digest).To(Equal(in.Digest), "the digest is stable")

	objs[1].Data["apiKey"] = []byte("rotated")
	g.Expect(c.Update(ctx, objs[1])).To(Succeed())
	changed, err := r.resolve(ctx, stackFixture())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed.Digest).NotTo(Equal(in.Digest), "a referenced Secret's change changes the digest")
}

func TestResolveInputsErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.Stack)
		objects bool
		stall   bool
		message string
	}{
		{name: "missing secret waits", objects: false, message: "spec.configFrom[0]: Secret creds not found"},
		{name: "bad config key stalls naming the field", objects: true, stall: true, message: "spec.config: key \"a:b:c\"",
			mutate: func(s *v1alpha1.Stack) { s.Spec.Config["a:b:c"] = apiextensionsv1.JSON{Raw: []byte(`1`)} }},
		{name: "no passphrase for a file backend stalls", objects: true, stall: true, message: "spec.secretsProvider.passphraseSecretRef is required",
			mutate: func(s *v1alpha1.Stack) { s.Spec.SecretsProvider = nil }},
		{name: "missing key of configFrom", objects: true, message: "spec.configFrom[0]: key \"nope\" not found",
			mutate: func(s *v1alpha1.Stack) { s.Spec.ConfigFrom[0].Keys = []string{"nope"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b := fake.NewClientBuilder()
			if tt.objects {
				b = b.WithObjects(secret("pass", map[string]string{"passphrase": "pw-123456"}), secret("creds", map[string]string{"apiKey": "k"}))
			}
			r := &inputsResolver{client: b.Build(), defaultBackend: "file:///d"}
			s := stackFixture()
			if tt.mutate != nil {
				tt.mutate(s)
			}
			_, err := r.resolve(ctx, s)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
			var st *StallingError
			g.Expect(errors.As(err, &st)).To(Equal(tt.stall))
			g.Expect(err.Error()).NotTo(ContainSubstring("pw-123456"))
		})
	}
}

func TestScrub(t *testing.T) {
	g := NewWithT(t)
	g.Expect(scrub("token abcdef and abcdefgh", []string{"abcdef", "abcdefgh"})).To(Equal("token [redacted] and [redacted]"))
	g.Expect(redactURL("https://user:pw@example.com/r.git")).To(Equal("https://example.com/r.git"))
}
