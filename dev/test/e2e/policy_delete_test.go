package e2e

import (
	"context"
	"strings"
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

// pairProgram manages the ConfigMap "policy-cache" and, withDB, the
// ConfigMap "policy-db".
func pairProgram(withDB bool) string {
	p := `name: pair
runtime: yaml
config:
  namespace:
    type: string
resources:
  cache:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: policy-cache
        namespace: ${namespace}
      data:
        role: cache
`
	if withDB {
		p += `  db:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: policy-db
        namespace: ${namespace}
      data:
        role: db
`
	}
	return p
}

// TestPolicyDelete: a rule for deletes, which Pulumi never asks a policy
// about, refuses a commit that drops the resource (nothing deleted,
// PolicyViolation with the URN) and the destroy of the deleted Stack (it
// stays, with its resources, until the rule is made advisory; then it is
// destroyed).
func TestPolicyDelete(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	f.git.Commit(t, "infra", "main", map[string]string{"pair/Pulumi.yaml": pairProgram(true)}, "a cache and a db")

	protect := &v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "protect", Namespace: f.ns},
		Spec: v1alpha1.StackPolicySpec{Rules: []v1alpha1.PolicyRule{{
			Name:  "keep-db",
			Match: v1alpha1.PolicyMatch{Types: []string{"kubernetes:core/v1:ConfigMap"}, Operations: []string{"delete"}},
			// The state's inputs say what is being deleted.
			Expression: "resource.oldInputs.data.role != 'db'",
			Message:    "the db ConfigMap holds data and is never deleted",
		}}}}
	g.Expect(env.Client.Create(ctx, protect)).To(Succeed())

	stack := f.stack("pair", func(s *v1alpha1.Stack) {
		s.Spec.Source.Dir = "pair"
		s.Spec.DestroyOnDelete = true
		s.Spec.Outputs = nil
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitApplied(t, key, "")
	urn := "urn:pulumi:" + s.GetStackName() + "::pair::kubernetes:core/v1:ConfigMap::db"
	violation := v1alpha1.PolicyViolation{Policy: "StackPolicy/" + f.ns + "/protect/keep-db", Enforcement: "mandatory", URN: urn,
		Message: "the db ConfigMap holds data and is never deleted"}
	g.Expect(s.Status.Policy.Violations).To(BeEmpty())
	exists := func(name string) bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &corev1.ConfigMap{})
		g.Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		return err == nil
	}

	// A commit that drops the db: refused, nothing deleted.
	f.git.Commit(t, "infra", "main", map[string]string{"pair/Pulumi.yaml": pairProgram(false)}, "drop the db")
	requestReconcile(t, key)
	s = waitNotReady(t, key, v1alpha1.PolicyViolationReason)
	g.Expect(readyMessage(s)).To(ContainSubstring(urn + ": StackPolicy/" + f.ns + "/protect/keep-db: the db ConfigMap holds data"))
	g.Expect(s.Status.Policy.Violations).To(ConsistOf(violation))
	g.Expect(conditions.Get(s, v1alpha1.PolicyCompliantCondition).Reason).To(Equal(v1alpha1.PolicyViolationReason))
	g.Expect(exists("policy-db")).To(BeTrue(), "a refused delete deleted the db")

	// The Stack deleted: its destroy is refused too, and it stays.
	g.Expect(env.Client.Delete(ctx, getStack(g, key))).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.DeletionTimestamp).NotTo(BeNil())
		g.Expect(s.Status.History).NotTo(BeEmpty())
		g.Expect(s.Status.History[0].Type).To(Equal(v1alpha1.OperationDestroy))
		g.Expect(s.Status.History[0].Reason).To(Equal(v1alpha1.PolicyViolationReason))
		g.Expect(s.Status.Policy.Violations).To(ConsistOf(violation))
	}, 4*time.Minute, time.Second).Should(Succeed())
	g.Expect(exists("policy-db") && exists("policy-cache")).To(BeTrue(), "a refused destroy deleted something")

	// Advisory: the destroy goes through on its next try.
	p := &v1alpha1.StackPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(protect), p)).To(Succeed())
	before := p.DeepCopy()
	p.Spec.Rules[0].Enforcement = v1alpha1.EnforcementAdvisory
	g.Expect(env.Client.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, key, &v1alpha1.Stack{})
		return apierrors.IsNotFound(err)
	}, 4*time.Minute, time.Second).Should(BeTrue(), "the Stack is destroyed once the rule is advisory")
	g.Expect(exists("policy-db") || exists("policy-cache")).To(BeFalse(), "the destroy left a ConfigMap")
	g.Expect(strings.Count(f.ctrl.Logs(t), "panic")).To(BeZero())
}
