package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestApprovalMonorepoCommitKeepsThePlan (issue 21, item 18): a Manual
// Stack's plan waits; a commit elsewhere in the repository is a new
// revision with the same program and inputs. The plan stays the pending one
// (no new preview, no PlanReplaced), and approving it applies it, at the
// revision resolved now.
func TestApprovalMonorepoCommitKeepsThePlan(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newApprovalFixture(t)
	f.start(t)
	logOnFailure(t, f.fixture)
	stack := f.approvalStack("mono", v1alpha1.ApprovalManual)
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitPlan(t, key, f.commit, "", v1alpha1.AwaitingApprovalReason)
	plan := s.Status.PendingPlan
	previews := f.ctrl.Operations(t, "preview")

	program := approvalProgram("blue", f.source)
	elsewhere := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": program, "docs/README.md": "other team\n"}, "docs")
	handled := waitHandled(t, key, requestReconcile(t, key))
	g.Expect(handled.Status.PendingPlan).NotTo(BeNil(), "PlanPending: %s", planPendingMessage(handled))
	g.Expect(handled.Status.PendingPlan.ID).To(Equal(plan.ID), "the plan of the same program and inputs stays")
	c := conditions.Get(handled, v1alpha1.PlanPendingCondition)
	g.Expect(c.Reason).To(Equal(v1alpha1.AwaitingApprovalReason))
	g.Expect(f.ctrl.Operations(t, "preview")).To(Equal(previews), "no new preview")
	events := stackEvents(t, f.ns, key.Name)
	g.Expect(hasLine(events, "PlanReplaced")).To(BeFalse(), "events: %v", events)
	g.Expect(hasLine(events, "ApprovalStale")).To(BeFalse(), "events: %v", events)
	g.Expect(f.planDir(handled, plan.ID)).To(BeADirectory())

	approve(t, key, plan.ID)
	s = waitApplied(t, key, elsewhere)
	up := records(s, v1alpha1.OperationUp)[0]
	g.Expect(up.Plan).To(Equal(plan.ID))
	g.Expect(up.Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(configMapData(g, f.ns, "approval-managed")).To(HaveKeyWithValue("color", "blue"))
	g.Expect(conditions.GetReason(s, v1alpha1.PlanPendingCondition)).To(Equal(v1alpha1.PlanAppliedReason))
}

// TestApprovalFailedUpIsNotAwaitingApproval (issue 21, item 18): the up of
// an approved plan fails (another host holds the stack's lock: nothing of the
// plan is applied). The plan stays approved and the up is retried with the
// failure backoff; through the retries PlanPending no longer says that the
// plan waits for approval. Once the lock is gone, the retry applies the plan.
func TestApprovalFailedUpIsNotAwaitingApproval(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newApprovalFixture(t)
	f.start(t)
	logOnFailure(t, f.fixture)
	stack := f.approvalStack("approved", v1alpha1.ApprovalManual)
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitPlan(t, key, f.commit, "", v1alpha1.AwaitingApprovalReason)
	plan := s.Status.PendingPlan

	// A lock of a live process on another host: the runner never clears it.
	lockDir := filepath.Join(f.dataDir, "state", f.ns, ".pulumi", "locks", "organization", "approval", "approved")
	g.Expect(os.MkdirAll(lockDir, 0o755)).To(Succeed())
	lock := filepath.Join(lockDir, "0b7c9a4e-2f57-4d6b-9d0e-1a2b3c4d5e6f.json")
	g.Expect(os.WriteFile(lock, []byte(`{"pid":4242,"username":"ci","hostname":"elsewhere","timestamp":"2026-12-01T10:00:00Z"}`), 0o644)).To(Succeed())

	approve(t, key, plan.ID)
	g.Eventually(func(g Gomega) {
		g.Expect(f.ctrl.Operations(t, "up")).To(BeNumerically(">=", 2), "the approved up failed and was retried")
		s := getStack(g, key)
		ups := records(s, v1alpha1.OperationUp)
		g.Expect(ups).NotTo(BeEmpty())
		g.Expect(ups[0].Plan).To(Equal(plan.ID))
		g.Expect(ups[0].Outcome).NotTo(Equal(v1alpha1.OutcomeSucceeded))
		g.Expect(ups[0].Reason).To(Equal(v1alpha1.LockedReason))
		g.Expect(s.Status.CurrentOperation).To(BeNil())
	}, 4*time.Minute, time.Second).Should(Succeed())

	// Between the retries: never "waits for approval".
	g.Consistently(func(g Gomega) {
		s := getStack(g, key)
		if s.Status.CurrentOperation != nil {
			return // the patcher writes the conditions first
		}
		c := conditions.Get(s, v1alpha1.PlanPendingCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).NotTo(Equal(v1alpha1.AwaitingApprovalReason), "PlanPending: %s", planPendingMessage(s))
		g.Expect(c.Message).NotTo(ContainSubstring("waits for approval"))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "the plan is not applied yet")
		g.Expect(c.Message).To(ContainSubstring("approved by " + approver))
		g.Expect(s.Status.PendingPlan).NotTo(BeNil())
		g.Expect(s.Status.PendingPlan.ID).To(Equal(plan.ID), "the approval stands")
		g.Expect(conditions.GetReason(s, v1alpha1.ReadyCondition)).NotTo(Equal(v1alpha1.AwaitingApprovalReason))
	}, 15*time.Second, 500*time.Millisecond).Should(Succeed())

	g.Expect(os.Remove(lock)).To(Succeed())
	s = waitApplied(t, key, f.commit)
	g.Expect(records(s, v1alpha1.OperationUp)[0].Plan).To(Equal(plan.ID))
	g.Expect(conditions.GetReason(s, v1alpha1.PlanPendingCondition)).To(Equal(v1alpha1.PlanAppliedReason))
}
