package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/receiver"
)

// A Receiver waits for its Secret (not Ready, not served), serves once it
// exists, moves to a new path when the token is rotated (the old one is
// 404), and with spec.resources asks only the Stacks it selects.
func TestReceiverSecretRotationAndSelector(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ctrl := startController(t, ns, t.TempDir())
	rcv := &v1alpha1.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: "generic", Namespace: ns},
		Spec: v1alpha1.ReceiverSpec{Type: v1alpha1.GenericHMACReceiver, SecretRef: v1alpha1.LocalObjectReference{Name: "hook-token"},
			Resources: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
	}
	g.Expect(env.Client.Create(ctx, rcv)).To(Succeed())
	key := client.ObjectKeyFromObject(rcv)
	ready := func(status metav1.ConditionStatus, reason string) string {
		t.Helper()
		var path string
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, key, rcv)).To(Succeed())
			c := apimeta.FindStatusCondition(rcv.Status.Conditions, v1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(status))
			g.Expect(c.Reason).To(Equal(reason))
			path = rcv.Status.WebhookPath
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
		return path
	}
	g.Expect(ready(metav1.ConditionFalse, v1alpha1.ReceiverSecretNotFoundReason)).To(BeEmpty())

	createSecret(t, ns, "hook-token", map[string]string{"token": "first-token"})
	oldPath := ready(metav1.ConditionTrue, v1alpha1.ReceiverServingReason)
	g.Expect(oldPath).To(Equal(receiver.WebhookPath([]byte("first-token"), "generic", ns)))

	var sec corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hook-token"}, &sec)).To(Succeed())
	sec.Data["token"] = []byte("second-token")
	g.Expect(env.Client.Update(ctx, &sec)).To(Succeed())
	newPath := receiver.WebhookPath([]byte("second-token"), "generic", ns)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, rcv)).To(Succeed())
		g.Expect(rcv.Status.WebhookPath).To(Equal(newPath))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	base := "http://" + ctrl.WebhookAddr
	g.Expect(post(t, http.MethodPost, base+oldPath, nil).Code).To(Equal(404))

	// Two Stacks on a repository nobody serves: only the selected one is asked.
	for name, labels := range map[string]map[string]string{"selected": {"team": "a"}, "unselected": {"team": "b"}} {
		s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "http://127.0.0.1:1/none.git"}},
				Interval: metav1.Duration{Duration: time.Hour}}}
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	// The receiver matches Stacks from the controller's cache: post only once
	// the controller has reconciled both (a Ready condition of its own), or a
	// slow cache answers "Stacks: 0".
	for _, name := range []string{"selected", "unselected"} {
		g.Eventually(func(g Gomega) {
			s := getStack(g, client.ObjectKey{Namespace: ns, Name: name})
			g.Expect(apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition)).NotTo(BeNil())
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), name)
	}
	body := []byte(`{"repository":"http://127.0.0.1:1/none"}`)
	sig := "sha256=" + hexSign(body, "first-token")
	g.Expect(post(t, http.MethodPost, base+newPath, body, "X-Signature", sig).Code).To(Equal(401), "the old token no longer signs")
	sig = "sha256=" + hexSign(body, "second-token")
	g.Expect(post(t, http.MethodPost, base+newPath, body, "X-Signature", sig)).To(Equal(hookResult{Code: 200, Outcome: "accepted", Stacks: 1}))
	g.Expect(getStack(g, client.ObjectKey{Namespace: ns, Name: "selected"}).Annotations).To(HaveKey(v1alpha1.ReconcileRequestAnnotation))
	g.Expect(getStack(g, client.ObjectKey{Namespace: ns, Name: "unselected"}).Annotations).NotTo(HaveKey(v1alpha1.ReconcileRequestAnnotation))
	g.Expect(receiverEvents(t, ctrl, "unknown", "invalid")).To(Equal(1))
	g.Expect(ctrl.Logs(t)).NotTo(Or(ContainSubstring("first-token"), ContainSubstring("second-token")))
}
