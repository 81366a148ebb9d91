package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// A registry's push notification (CNCF Distribution envelope, unsigned, to a
// Receiver that accepts unsigned calls: the path is the credential) reconciles the Stack following the pushed tag,
// not one following another tag; pings, other events and other methods
// reconcile nothing.
func TestReceiverOCIPush(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newOCIFixture(t)
	first := pushProgram(t, f.url("infra/app")+":stable", "oci-settings", "", "")
	pushProgram(t, f.url("infra/app")+":canary", "oci-settings", "", "")
	f.start(t)
	hook := createReceiver(t, f.ns, f.ctrl, "registry", v1alpha1.OCIReceiver, func(r *v1alpha1.Receiver) { r.Spec.AcceptUnsigned = true })
	stable := f.stack("stable", "infra/app", v1alpha1.OCIRef{Tag: "stable"}, func(s *v1alpha1.Stack) { s.Spec.Source.Dir = "not-here" })
	canary := f.stack("canary", "infra/app", v1alpha1.OCIRef{Tag: "canary"}, func(s *v1alpha1.Stack) { s.Spec.Source.Dir = "not-here" })
	for _, s := range []*v1alpha1.Stack{stable, canary} {
		s.Spec.Interval.Duration = time.Hour
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	stableKey := client.ObjectKeyFromObject(stable)
	g.Eventually(func(g Gomega) {
		s := getStack(g, stableKey)
		g.Expect(conditions.IsStalled(s)).To(BeTrue())
		g.Expect(readyMessage(s)).To(ContainSubstring(first))
	}, 2*time.Minute, time.Second).Should(Succeed())

	second := pushProgram(t, f.url("infra/app")+":stable", "oci-settings", "\n        v: two", "")
	host := strings.TrimPrefix(f.url(""), "oci://")
	host = strings.TrimSuffix(host, "/")
	envelope, _ := json.Marshal(map[string]any{"events": []any{map[string]any{
		"action": "push", "target": map[string]any{"repository": "infra/app", "tag": "stable", "digest": second},
		"request": map[string]any{"host": host},
	}}})

	g.Expect(post(t, http.MethodGet, hook, nil).Code).To(Equal(405))
	pull, _ := json.Marshal(map[string]any{"events": []any{map[string]any{"action": "pull",
		"target": map[string]any{"repository": "infra/app", "tag": "stable"}, "request": map[string]any{"host": host}}}})
	g.Expect(post(t, http.MethodPost, hook, pull)).To(Equal(hookResult{Code: 200, Outcome: "ignored"}))
	g.Expect(post(t, http.MethodPost, hook, []byte("{not json"))).To(Equal(hookResult{Code: 400, Outcome: "invalid"}))
	g.Expect(post(t, http.MethodPost, hook, envelope, "X-Signature", "sha256=00")).To(Equal(hookResult{Code: 401, Outcome: "unauthorized"}))
	g.Expect(getStack(g, stableKey).Annotations).NotTo(HaveKey(v1alpha1.ReconcileRequestAnnotation))

	began := time.Now()
	g.Expect(post(t, http.MethodPost, hook, envelope)).To(Equal(hookResult{Code: 200, Outcome: "accepted", Stacks: 1}))
	g.Eventually(func(g Gomega) {
		g.Expect(readyMessage(getStack(g, stableKey))).To(ContainSubstring(second))
	}, time.Minute, 50*time.Millisecond).Should(Succeed())
	t.Logf("registry push -> %s resolved in %s (interval 1h)", second[:19], time.Since(began).Round(10*time.Millisecond))
	g.Expect(getStack(g, client.ObjectKeyFromObject(canary)).Annotations).NotTo(HaveKey(v1alpha1.ReconcileRequestAnnotation))
	for outcome, want := range map[string]int{"accepted": 1, "ignored": 1, "invalid": 2, "unauthorized": 1} {
		g.Expect(receiverEvents(t, f.ctrl, "oci", outcome)).To(Equal(want), outcome)
	}
}
