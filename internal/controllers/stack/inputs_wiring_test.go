package stack

import (
	"bytes"
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	inp "github.com/stackpilot/stackpilot/internal/inputs"
)

var staticDigestKey = inp.StaticDigestKey

const digestKeySize = inp.DigestKeySize

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

// keepInputs keeps the inputs of a Stack with rollback on, and drops them
// when rollback is turned off.
func TestKeepInputsFollowsRollback(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := &StackReconciler{InputsDir: t.TempDir(), DigestKey: staticDigestKey(bytes.Repeat([]byte{7}, digestKeySize))}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"},
		Spec: v1alpha1.StackSpec{Rollback: &v1alpha1.Rollback{Enabled: true}}}
	in := &inputs{Backend: "file:///state", Env: map[string]string{}, Digest: "hmac-sha256:aaaa"}
	r.keepInputs(ctx, &reconcileState{stack: stack, inputs: in})
	_, err := r.keptInputs(ctx, "uid-1", in.Digest)
	g.Expect(err).NotTo(HaveOccurred())

	stack.Spec.Rollback.Enabled = false
	r.keepInputs(ctx, &reconcileState{stack: stack, inputs: in})
	_, err = r.keptInputs(ctx, "uid-1", in.Digest)
	g.Expect(err).To(MatchError(errInputsNotKept))
}

// A namespace being deleted takes the Stack's ServiceAccount with it: the
// finalizer must not wait for it for ever (it would hold the namespace).
func TestServiceAccountGoneWithNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := metav1.Now()
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}}
	r := &StackReconciler{APIReader: fake.NewClientBuilder().WithObjects(terminating).Build()}
	// A Pulumi Cloud backend needs no passphrase: the ServiceAccount is all
	// that is missing.
	s := stackFixture()
	s.Spec.Backend, s.Spec.SecretsProvider, s.Spec.ConfigFrom, s.Spec.ServiceAccountName = "https://api.pulumi.com", nil, nil, "deployer"
	_, err := (&inp.Resolver{Client: fake.NewClientBuilder().Build(), DigestKey: staticDigestKey(bytes.Repeat([]byte{7}, digestKeySize))}).Resolve(ctx, s)
	g.Expect(err).To(HaveOccurred())
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.ServiceAccountNotFoundReason))
	g.Expect(r.inputsGoneWithNamespace(ctx, stackFixture(), err)).To(BeTrue())

	live := &StackReconciler{APIReader: fake.NewClientBuilder().WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}).Build()}
	g.Expect(live.inputsGoneWithNamespace(ctx, stackFixture(), err)).To(BeFalse(), "a live namespace: wait for the ServiceAccount")
}
