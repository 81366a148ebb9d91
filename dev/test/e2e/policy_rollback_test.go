package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestPolicyRollback: a rollback runs under the policies too. A rule added
// after the first apply wants app-settings to keep a size; a commit that
// adds one and then fails part-way is rolled back, and the rollback, which
// would take the size away again, is refused before it touches anything
// (RollbackFailed, the rollback's record PolicyViolation; the failed
// change's resources stay as it left them). The policy deleted, the change
// is tried again at once, fails again, and its rollback now applies.
func TestPolicyRollback(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	logOnFailure(t, f)
	stack := f.rollbackStack("guarded-rollback")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	keepSize := &v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "keep-size", Namespace: f.ns},
		Spec: v1alpha1.StackPolicySpec{Rules: []v1alpha1.PolicyRule{{
			Name:       "sized",
			Match:      v1alpha1.PolicyMatch{Types: []string{configMapType}, Names: []string{"settings"}},
			Expression: "has(resource.inputs.data.size)", Message: "app-settings must keep a size",
		}}}}
	g.Expect(env.Client.Create(ctx, keepSize)).To(Succeed())

	bad := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": partwayProgram("\n        size: large")}, "fails part-way")
	s := waitNotReady(t, key, v1alpha1.RollbackFailedReason)
	expectRolledBack(g, s, bad, f.commit, v1alpha1.OutcomeFailed)
	g.Expect(s.Status.History[1].Message).To(ContainSubstring("Not_A_Valid_Name"), "the up failed on the refused ConfigMap, not on the rule")
	rollback := s.Status.History[0]
	g.Expect(rollback.Reason).To(Equal(v1alpha1.PolicyViolationReason), "rollback: %+v", rollback)
	g.Expect(rollback.Message).To(ContainSubstring("StackPolicy/" + f.ns + "/keep-size/sized: app-settings must keep a size"))
	g.Expect(s.Status.Policy).NotTo(BeNil())
	g.Expect(s.Status.Policy.OperationID).To(Equal(rollback.ID), "status.policy tells of the rollback")
	// Refused before its first step: the failed change's resources are as
	// it left them.
	g.Expect(configMapData(g, f.ns, "app-settings")).To(Equal(map[string]string{"color": "blue", "size": "large"}))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-extra"}, &corev1.ConfigMap{})).To(Succeed(),
		"the refused rollback deleted what the failed change created")
	g.Expect(f.ctrl.Operations(t, "rollback")).To(Equal(1))

	// The policy goes: the change is tried again at once (not waiting for a
	// person, as a rollback that failed otherwise would), fails again, and
	// the rollback restores the applied revision.
	ups := f.ctrl.Operations(t, "up")
	g.Expect(env.Client.Delete(ctx, keepSize)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(f.ctrl.Operations(t, "rollback")).To(Equal(2))
	}, 4*time.Minute, time.Second).Should(Succeed())
	s = waitNotReady(t, key, v1alpha1.RolledBackReason)
	expectRolledBack(g, s, bad, f.commit, v1alpha1.OutcomeSucceeded)
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups+1), "the policy's delete tried the change once")
	g.Expect(configMapData(g, f.ns, "app-settings")).To(Equal(map[string]string{"color": "blue"}), "the old data is back")
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-extra"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ConfigMap the failed change created is removed: %v", err)
	g.Expect(s.Status.Policy).To(BeNil(), "no policy selects the Stack any more")
}
