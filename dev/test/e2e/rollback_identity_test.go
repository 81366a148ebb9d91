package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// grantVerbs lets ServiceAccount ns/name do verbs on ConfigMaps in ns.
func grantVerbs(t *testing.T, ns, name string, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-configmaps", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-configmaps", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRollbackUsesTodaysIdentity (issue 21, item 4): revision good was
// applied as the controller (no ServiceAccount anywhere). An admin then
// sets --default-service-account=deployer, a ServiceAccount that may create
// and update ConfigMaps but not delete them. The next commit's up (as
// deployer) creates app-extra and fails part-way; its automatic rollback
// must act as deployer too, by today's rules, not as the controller the
// kept inputs name: deleting app-extra is forbidden to it, so the rollback
// fails, naming the ServiceAccount, and app-extra stays.
func TestRollbackUsesTodaysIdentity(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	logOnFailure(t, f)
	stack := f.rollbackStack("identity")
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	waitApplied(t, key, f.commit)

	createServiceAccount(t, f.ns, "deployer")
	grantVerbs(t, f.ns, "deployer", "get", "list", "watch", "create", "update", "patch")
	g.Expect(f.ctrl.Stop()).To(Succeed())
	bad := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": partwayProgram("")}, "fails part-way")
	f.start(t, "--default-service-account=deployer")

	var s *v1alpha1.Stack
	g.Eventually(func(g Gomega) {
		s = getStack(g, key)
		g.Expect(s.Status.Rollback).NotTo(BeNil(), "Ready: %s", readyMessage(s))
		g.Expect(s.Status.Rollback.Outcome).To(BeElementOf(v1alpha1.OutcomeSucceeded, v1alpha1.OutcomeFailed))
		g.Expect(s.Status.CurrentOperation).To(BeNil())
	}, 4*time.Minute, time.Second).Should(Succeed())
	g.Expect(s.Status.History[1].Revision).To(HaveSuffix(bad))
	g.Expect(s.Status.History[1].Message).To(ContainSubstring("Not_A_Valid_Name"), "the up as deployer got as far as the refused name")
	g.Expect(configMapData(g, f.ns, "app-extra")).To(HaveKeyWithValue("a", "1"))

	g.Expect(s.Status.Rollback.Outcome).To(Equal(v1alpha1.OutcomeFailed), "a rollback as the controller could delete app-extra: %s", readyMessage(s))
	s = waitNotReady(t, key, v1alpha1.RollbackFailedReason)
	expectRolledBack(g, s, bad, f.commit, v1alpha1.OutcomeFailed)
	g.Expect(s.Status.History[0].Message).To(ContainSubstring(`"system:serviceaccount:` + f.ns + `:deployer" cannot delete`))
	g.Expect(configMapData(g, f.ns, "app-extra")).To(HaveKeyWithValue("a", "1"), "the rollback did not act as the controller")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-extra"}, &corev1.ConfigMap{})).To(Succeed())
}
