package e2e

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestDriftSecretNeverShown: a Secret the program owns is edited by hand. The
// check reports it and the remediate restores it, and neither value, plain or
// base64 as the API server keeps it, shows in the Stack's status, its events
// or the controller's log.
func TestDriftSecretNeverShown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const original, edited = "drift-0riginal-t0ken-4a7e", "drift-ed1ted-t0ken-9c2b"
	f := newDriftFixture(t, secretProgram)
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": original})
	f.start(t)
	logOnFailure(t, f)
	stack := f.driftStack("secret", v1alpha1.DriftDetection{Mode: v1alpha1.DriftDetect}, func(s *v1alpha1.Stack) {
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "drift-credentials"}}
	token := func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(owned), owned)).To(Succeed())
		return string(owned.Data["token"])
	}
	g.Expect(token(g)).To(Equal(original))

	patchObject(t, owned, `{"stringData":{"token":"`+edited+`"}}`)
	g.Expect(token(g)).To(Equal(edited))
	s := driftCheck(t, key, nil)
	expectDrifted(g, s, metav1.ConditionTrue, v1alpha1.DriftDetectedReason)
	g.Expect(s.Status.Drift.Resources).To(HaveLen(1), "status.drift: %+v", s.Status.Drift)
	r := s.Status.Drift.Resources[0]
	g.Expect(r.Name).To(Equal("credentials"))
	g.Expect(r.Type).To(Equal("kubernetes:core/v1:Secret"))
	g.Expect(r.Op).To(Equal("update"))
	t.Logf("reported: %+v; Drifted %s", r, driftedMessage(s))

	driftCheck(t, key, map[string]any{"driftDetection": map[string]any{"mode": v1alpha1.DriftRemediate}})
	g.Eventually(func(g Gomega) {
		expectDrifted(g, getStack(g, key), metav1.ConditionFalse, v1alpha1.RemediatedReason)
		g.Expect(token(g)).To(Equal(original))
	}, 2*time.Minute, time.Second).Should(Succeed())

	b64 := base64.StdEncoding.EncodeToString
	assertNoSecrets(t, f, key, original, edited, b64([]byte(original)), b64([]byte(edited)), passphrase)
}
