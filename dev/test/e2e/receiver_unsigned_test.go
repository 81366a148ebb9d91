package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestReceiverOCIUnsigned: an oci Receiver refuses a push notification
// without X-Signature (401, no Stack asked) as it refuses a wrong one, unless
// its spec.acceptUnsigned says the registry cannot sign. A signed body
// captured and sent again with a new delivery id is a replay: the replay
// check keys on the digest of the signed body, not on an unsigned header.
func TestReceiverOCIUnsigned(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ctrl := startController(t, ns, t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log (last 40 lines):\n%s", testenv.TailFile(ctrl.LogPath, 40))
		}
	})
	hook := createReceiver(t, ns, ctrl, "registry", v1alpha1.OCIReceiver)

	// Nobody serves this registry: the Stack only must be asked, or not.
	const host, repo = "127.0.0.1:1", "infra/app"
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{OCI: &v1alpha1.OCISource{
			URL: "oci://" + host + "/" + repo, Ref: &v1alpha1.OCIRef{Tag: "stable"}}},
			Interval: metav1.Duration{Duration: time.Hour}}}
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	// The controller has seen the Stack (its cache holds it) once it added
	// its finalizer; a request before that would find no Stack to ask.
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, key).Finalizers).To(ContainElement(v1alpha1.StackFinalizer))
	}, 2*time.Minute, time.Second).Should(Succeed())
	asked := func() string { return getStack(g, key).Annotations[v1alpha1.ReconcileRequestAnnotation] }

	n := 0
	push := func() []byte { // a new notification each time, as a registry sends
		n++
		body, _ := json.Marshal(map[string]any{"events": []any{map[string]any{
			"id": fmt.Sprintf("event-%d", n), "action": "push",
			"target": map[string]any{"repository": repo, "tag": "stable"}, "request": map[string]any{"host": host},
		}}})
		return body
	}
	signed := func(body []byte) string { return "sha256=" + hexSign(body, webhookToken) }

	g.Expect(post(t, http.MethodPost, hook, push())).To(Equal(hookResult{Code: 401, Outcome: "unauthorized"}),
		"no X-Signature is refused")
	g.Expect(post(t, http.MethodPost, hook, push(), "X-Signature", "sha256=00")).To(Equal(hookResult{Code: 401, Outcome: "unauthorized"}))
	g.Expect(asked()).To(BeEmpty(), "a refused request asked for a reconcile")

	body := push()
	g.Expect(post(t, http.MethodPost, hook, body, "X-Signature", signed(body), "X-Delivery-ID", "d-1")).
		To(Equal(hookResult{Code: 200, Outcome: "accepted", Stacks: 1}))
	first := asked()
	g.Expect(first).NotTo(BeEmpty())
	g.Expect(post(t, http.MethodPost, hook, body, "X-Signature", signed(body), "X-Delivery-ID", "d-2")).
		To(Equal(hookResult{Code: 200, Outcome: "replayed"}), "the same signed body with a new delivery id")
	g.Expect(post(t, http.MethodPost, hook, body, "X-Signature", signed(body))).
		To(Equal(hookResult{Code: 200, Outcome: "replayed"}), "the same signed body with no delivery id")
	g.Expect(asked()).To(Equal(first), "a replay asked for a reconcile")

	// The opt-in: unsigned requests are acted on, a wrong signature is not.
	patch := []byte(`{"spec":{"acceptUnsigned":true}}`)
	g.Expect(env.Client.Patch(ctx, &v1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry"}},
		client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	g.Eventually(func() hookResult { return post(t, http.MethodPost, hook, push()) }, time.Minute, time.Second).
		Should(Equal(hookResult{Code: 200, Outcome: "accepted", Stacks: 1}))
	g.Expect(asked()).NotTo(Equal(first))
	g.Expect(post(t, http.MethodPost, hook, push(), "X-Signature", "sha256=00")).To(Equal(hookResult{Code: 401, Outcome: "unauthorized"}),
		"a signature, when sent, is checked")

	// Only oci may skip signatures: the API server says so.
	other := &v1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "github"},
		Spec: v1alpha1.ReceiverSpec{Type: v1alpha1.GitHubReceiver, AcceptUnsigned: true,
			SecretRef: v1alpha1.LocalObjectReference{Name: "registry-token"}}}
	err := env.Client.Create(ctx, other)
	g.Expect(err).To(MatchError(ContainSubstring("acceptUnsigned applies to type oci only")))
}
