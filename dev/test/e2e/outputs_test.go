package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestOutputsRestored: someone deletes the published outputs Secret and edits
// the ConfigMap. The next reconcile finds nothing to apply, notices, and
// restores both from the stack's state, secret output included, without an up.
func TestOutputsRestored(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": "s3cr3t-t0ken-value"})
	f.start(t)
	stack := f.stack("published", func(s *v1alpha1.Stack) {
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	applied := waitApplied(t, key, f.commit)
	ups := f.ctrl.Operations(t, "up")

	out := client.ObjectKey{Namespace: f.ns, Name: "published-outputs"}
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: out.Namespace, Name: out.Name}})).To(Succeed())
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, out, &cm)).To(Succeed())
	cm.Data["color"] = "tampered"
	cm.Data["extra"] = "added by hand"
	g.Expect(env.Client.Update(ctx, &cm)).To(Succeed())
	requestReconcile(t, key)

	g.Eventually(func(g Gomega) {
		var sec corev1.Secret
		g.Expect(env.Client.Get(ctx, out, &sec)).To(Succeed())
		g.Expect(string(sec.Data["token"])).To(Equal("s3cr3t-t0ken-value"))
		g.Expect(string(sec.Data["color"])).To(Equal("blue"))
		g.Expect(sec.OwnerReferences).To(HaveLen(1))
		g.Expect(configMapData(g, f.ns, out.Name)).To(Equal(map[string]string{"color": "blue", "configMap": "app-settings"}))
	}, time.Minute, time.Second).Should(Succeed())

	s := waitApplied(t, key, f.commit)
	g.Expect(s.Status.History).To(Equal(applied.Status.History), "restoring ran no operation of its own")
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups), "no up ran")
	g.Expect(f.ctrl.Operations(t, "outputs")).To(Equal(1))
	g.Expect(f.ctrl.Logs(t)).NotTo(ContainSubstring("s3cr3t-t0ken-value"))

	// Intact outputs are left alone: another reconcile, seen to have run,
	// reads nothing from Pulumi.
	s = waitHandled(t, key, requestReconcile(t, key))
	g.Expect(f.ctrl.Operations(t, "outputs")).To(Equal(1), "the requested reconcile ran no outputs operation")
	g.Expect(conditions.IsTrue(s, v1alpha1.OutputsPublishedCondition)).To(BeTrue())
	g.Consistently(func() int { return f.ctrl.Operations(t, "outputs") }, 5*time.Second, time.Second).Should(Equal(1))
}
