package inputs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/serror"
)

func TestNamespacedBackend(t *testing.T) {
	g := NewWithT(t)
	g.Expect(namespacedBackend("file:///data/state/{namespace}", "team-a", "net")).To(Equal("file:///data/state/team-a"))
	g.Expect(namespacedBackend("file:///data/state", "team-a", "net")).To(Equal("file:///data/state/team-a"))
	g.Expect(namespacedBackend("s3://bucket/prefix/", "team-b", "net")).To(Equal("s3://bucket/prefix/team-b"))
	g.Expect(namespacedBackend("https://api.pulumi.com", "team-b", "net")).To(Equal("https://api.pulumi.com"))
	g.Expect(namespacedBackend("file:///s", "a", "net")).NotTo(Equal(namespacedBackend("file:///s", "b", "net")),
		"two namespaces never share the default backend")
	// A directory per Stack, for fleets on a file backend.
	g.Expect(namespacedBackend("file:///data/state/{namespace}/{name}", "team-a", "net")).To(Equal("file:///data/state/team-a/net"))
	g.Expect(CheckDefaultBackend("file:///data/state/{namespace}/{name}")).To(Succeed())
	g.Expect(CheckDefaultBackend("file:///data/state/{namespace}")).To(Succeed())
	g.Expect(CheckDefaultBackend("file:///data/state/{name}")).To(MatchError(ContainSubstring("{namespace}/{name}")))
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
	r := &Resolver{Client: c, DefaultBackend: "file:///data/state/{namespace}", DigestKey: testKey}

	in, err := r.Resolve(ctx, stackFixture())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Backend).To(Equal("file:///data/state/infra"))
	g.Expect(in.Env).To(HaveKeyWithValue("PULUMI_CONFIG_PASSPHRASE", "pw-123456"))
	g.Expect(in.Config).To(HaveLen(3))
	g.Expect(in.Config[0].Key).To(Equal("apiKey"))
	g.Expect(in.Config[0].Secret).To(BeTrue(), "values from Secrets are Pulumi secrets")
	g.Expect(in.Config[2].Value).To(Equal(map[string]any{"team": "a"}), "structured config stays structured")
	g.Expect(in.Secrets).To(ContainElements("pw-123456", "k-987654"))
	g.Expect(in.Digest).To(HavePrefix("hmac-sha256:"))
	g.Expect(in.Digest).NotTo(ContainSubstring("k-987654"))

	again, err := r.Resolve(ctx, stackFixture())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Digest).To(Equal(in.Digest), "the digest is stable")

	objs[1].Data["apiKey"] = []byte("rotated")
	g.Expect(c.Update(ctx, objs[1])).To(Succeed())
	changed, err := r.Resolve(ctx, stackFixture())
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
			r := &Resolver{Client: b.Build(), DefaultBackend: "file:///d", DigestKey: testKey}
			s := stackFixture()
			if tt.mutate != nil {
				tt.mutate(s)
			}
			_, err := r.Resolve(ctx, s)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
			var st *serror.StallingError
			g.Expect(errors.As(err, &st)).To(Equal(tt.stall))
		})
	}
}

func TestScrub(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Scrub("token abcdef and abcdefgh", []string{"abcdef", "abcdefgh"})).To(Equal("token [redacted] and [redacted]"))
	g.Expect(redactURL("https://user:pw@example.com/r.git")).To(Equal("https://example.com/r.git"))
}

// staticKey is a fixed inputs digest key.
type staticKey []byte

func (k staticKey) Get(context.Context) ([]byte, error) { return k, nil }

var testKey = staticKey(bytes.Repeat([]byte{7}, 32))

// TestResolvedSecretsAreScrubbed feeds messages that really contain each secret
// value the resolver reads (as Pulumi prints them when it echoes a bad
// passphrase or a provider credential) through the scrubbing the controller
// applies to history, conditions and events: every value must be gone. A value
// that the resolver forgets to mark secret shows here.
func TestResolvedSecretsAreScrubbed(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "infra"}, Data: map[string]string{"region": "eu-west-9"}}
	objs := []client.Object{
		secret("pass", map[string]string{"passphrase": "pw-123456"}),
		secret("default-pass", map[string]string{"passphrase": "dflt-pw-654321"}),
		secret("creds", map[string]string{"apiKey": "k-987654"}),
		secret("env", map[string]string{"TOKEN": "env-tok-111222"}),
		secret("backend", map[string]string{"AWS_SECRET_ACCESS_KEY": "aws-sk-333444"}),
		cm,
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	withEnvAndBackend := func(s *v1alpha1.Stack) {
		s.Spec.EnvFrom = []v1alpha1.EnvFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "env"}},
			{ConfigMapRef: &v1alpha1.OptionalObjectReference{Name: "plain"}}}
		s.Spec.BackendSecretRef = &v1alpha1.LocalObjectReference{Name: "backend"}
	}
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.Stack)
		secrets []string
	}{
		{name: "spec passphrase, configFrom, envFrom and backend Secrets", mutate: withEnvAndBackend,
			secrets: []string{"pw-123456", "k-987654", "env-tok-111222", "aws-sk-333444"}},
		{name: "the controller's default passphrase", mutate: func(s *v1alpha1.Stack) { s.Spec.SecretsProvider = nil },
			secrets: []string{"dflt-pw-654321"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Resolver{Client: c, DefaultBackend: "file:///d", DefaultPassphraseSecret: "default-pass", DigestKey: testKey}
			s := stackFixture()
			tt.mutate(s)
			in, err := r.Resolve(ctx, s)
			g.Expect(err).NotTo(HaveOccurred())
			for _, v := range tt.secrets {
				msg := "error: decrypting: incorrect passphrase or credential \"" + v + "\" (" + v + ")"
				g.Expect(msg).To(ContainSubstring(v), "the message really holds the value")
				g.Expect(Scrub(msg, in.Secrets)).NotTo(ContainSubstring(v), "scrubbed from what the Stack shows")
			}
			g.Expect(Scrub("region eu-west-9", in.Secrets)).To(ContainSubstring("eu-west-9"), "ConfigMap values are not secret")
		})
	}
}

// TestInputsDigestIsKeyed: the digest is an HMAC under the controller's key, so
// who can read a Stack cannot test passphrase guesses against it offline.
func TestInputsDigestIsKeyed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(secret("pass", map[string]string{"passphrase": "pw-123456"}),
		secret("creds", map[string]string{"apiKey": "k-987654"})).Build()
	resolve := func(key KeySource, mutate ...func(*v1alpha1.Stack)) *Inputs {
		s := stackFixture()
		for _, m := range mutate {
			m(s)
		}
		in, err := (&Resolver{Client: c, DefaultBackend: "file:///d", DigestKey: key}).Resolve(ctx, s)
		g.Expect(err).NotTo(HaveOccurred())
		return in
	}
	in := resolve(testKey)
	g.Expect(resolve(testKey).Digest).To(Equal(in.Digest), "the same inputs under the same key are stable")
	otherKey := staticKey(bytes.Repeat([]byte{8}, 32))
	g.Expect(resolve(otherKey).Digest).NotTo(Equal(in.Digest), "the digest depends on the key")

	// An attacker who knows every input but the passphrase recomputes the
	// unkeyed hash of each guess: none may match what status shows.
	hexDigest := strings.TrimPrefix(in.Digest, digestPrefix)
	for _, guess := range []string{"pw-123456", "password", "pw-000000"} {
		guessed := *in
		guessed.Env = map[string]string{"PULUMI_CONFIG_PASSPHRASE": guess}
		sum := sha256.Sum256(digestDocument(stackFixture(), &guessed))
		g.Expect(hex.EncodeToString(sum[:])).NotTo(Equal(hexDigest), "guess %q", guess)
	}
	sum := sha256.Sum256(digestDocument(stackFixture(), in))
	g.Expect(in.Digest).NotTo(HaveSuffix(hex.EncodeToString(sum[:])), "not the unsalted SHA-256 of the inputs")

	g.Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: "infra"}})).To(Succeed())
	asDeployer := resolve(testKey, func(s *v1alpha1.Stack) { s.Spec.ServiceAccountName = "deployer" })
	g.Expect(asDeployer.ServiceAccount).To(Equal("deployer"))
	g.Expect(asDeployer.Digest).NotTo(Equal(in.Digest), "a change of identity is a change of inputs")
}
