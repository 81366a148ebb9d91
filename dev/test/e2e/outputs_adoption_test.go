package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestOutputsNeverAdoptUnowned: a Stack names, as its outputs Secret, the
// passphrase Secret it decrypts its state with, and as its ConfigMap one a
// person made. Neither was created by the Stack nor labelled for it: the
// publish is refused (OutputsConflict), both keep their data and no owner,
// and deleting the Stack leaves them. A ConfigMap labelled for a second
// Stack is adopted, and the garbage collector deletes it with that Stack
// (which shows the first deletion had every chance to take the others).
func TestOutputsNeverAdoptUnowned(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	handMade := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hand-made"},
		Data:       map[string]string{"owner": "a person"},
	}
	g.Expect(env.Client.Create(ctx, handMade)).To(Succeed())
	optedIn := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "opted-in",
			Labels: map[string]string{v1alpha1.AdoptOutputsLabel: "adopter"}},
		Data: map[string]string{"stale": "yes"},
	}
	g.Expect(env.Client.Create(ctx, optedIn)).To(Succeed())
	f.start(t)

	intruder := f.stack("intruder", func(s *v1alpha1.Stack) {
		s.Spec.Outputs = &v1alpha1.OutputsTarget{SecretName: "pulumi-passphrase", ConfigMapName: "hand-made"}
	})
	g.Expect(env.Client.Create(ctx, intruder)).To(Succeed())
	adopter := f.stack("adopter", func(s *v1alpha1.Stack) {
		s.Spec.Outputs = &v1alpha1.OutputsTarget{ConfigMapName: "opted-in"}
	})
	g.Expect(env.Client.Create(ctx, adopter)).To(Succeed())

	s := waitNotReady(t, client.ObjectKeyFromObject(intruder), v1alpha1.OutputsConflictReason)
	c := conditions.Get(s, v1alpha1.OutputsPublishedCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(v1alpha1.OutputsConflictReason))
	g.Expect(c.Message).To(ContainSubstring("pulumi-passphrase"))
	g.Expect(c.Message).To(ContainSubstring(v1alpha1.AdoptOutputsLabel), "the message says how to opt in")
	g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(f.commit), "the up itself applied")
	assertUntouched(t, f.ns)

	waitApplied(t, client.ObjectKeyFromObject(adopter), f.commit)
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(optedIn), &cm)).To(Succeed())
	g.Expect(cm.Data).To(And(HaveKeyWithValue("color", "blue"), HaveKeyWithValue("configMap", "app-settings")), "the opted-in ConfigMap holds the outputs")
	g.Expect(metav1.GetControllerOf(&cm)).NotTo(BeNil())
	g.Expect(metav1.GetControllerOf(&cm).Name).To(Equal("adopter"))

	// Another reconcile keeps refusing; nothing changes in between.
	waitHandled(t, client.ObjectKeyFromObject(intruder), requestReconcile(t, client.ObjectKeyFromObject(intruder)))
	assertUntouched(t, f.ns)

	g.Expect(env.Client.Delete(ctx, intruder)).To(Succeed())
	waitStackGone(t, client.ObjectKeyFromObject(intruder))
	g.Expect(env.Client.Delete(ctx, adopter)).To(Succeed())
	waitStackGone(t, client.ObjectKeyFromObject(adopter))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(optedIn), &corev1.ConfigMap{}))
	}, 2*time.Minute, time.Second).Should(BeTrue(), "the garbage collector deletes what the adopter owned")
	assertUntouched(t, f.ns)
}

// assertUntouched checks the passphrase Secret and the hand-made ConfigMap
// are as made: same data, no owner, no outputs annotations.
func assertUntouched(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var sec corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pulumi-passphrase"}, &sec)).To(Succeed())
	g.Expect(sec.Data).To(Equal(map[string][]byte{"passphrase": []byte(passphrase)}))
	g.Expect(sec.OwnerReferences).To(BeEmpty())
	g.Expect(sec.Annotations).NotTo(HaveKey(v1alpha1.SecretOutputsAnnotation))
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hand-made"}, &cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"owner": "a person"}))
	g.Expect(cm.OwnerReferences).To(BeEmpty())
}

// waitStackGone waits until a deleted Stack's finalizer has run.
func waitStackGone(t *testing.T, key client.ObjectKey) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), key, &v1alpha1.Stack{}))
	}, 4*time.Minute, time.Second).Should(BeTrue())
}
