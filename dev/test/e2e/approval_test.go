package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestApprovalManual follows one Manual Stack through its plans, real
// previews and ups with Pulumi's update plans. The steps build on each
// other (one Stack: every Pulumi run costs seconds), so a failed step ends
// the test.
//
//	first:   the first commit makes a plan (create) and applies nothing
//	approve: approving it applies exactly it; history preview, then up with plan and approvedBy
//	replace: a commit while a plan is pending replaces it (old files gone)
//	stale:   approving the replaced id applies nothing; approving the new one applies it
//	invalid: a change of what the program reads, after the plan, fails the
//	         approved up (PlanInvalid), changes nothing, and a new plan appears
//	deleted: the finalizer removes the plans of a deleted Stack
func TestApprovalManual(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newApprovalFixture(t)
	f.start(t)
	logOnFailure(t, f.fixture)
	stack := f.approvalStack("manual", v1alpha1.ApprovalManual)
	if err := env.Client.Create(ctx, stack); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(stack)
	var plan *v1alpha1.PendingPlan // the plan the next step approves
	var s *v1alpha1.Stack

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"first", func(t *testing.T) {
			g := NewWithT(t)
			s = waitPlan(t, key, f.commit, "", v1alpha1.AwaitingApprovalReason)
			plan = s.Status.PendingPlan
			g.Expect(plan.Changes.Create).To(BeNumerically(">=", 1), "pendingPlan: %+v", plan)
			g.Expect(plan.Changes.Update + plan.Changes.Replace + plan.Changes.Delete).To(BeZero())
			cm := planned(plan, managedCM)
			g.Expect(cm).NotTo(BeNil(), "resources: %+v", plan.Resources)
			g.Expect(cm.Op).To(Equal("create"))
			g.Expect(plan.Total).To(Equal(int64(len(plan.Resources))))
			g.Expect(plan.InputsDigest).NotTo(BeEmpty())
			g.Expect(plan.ProgramDigest).NotTo(BeEmpty())

			ready := conditions.Get(s, v1alpha1.ReadyCondition)
			g.Expect(ready.Status).To(BeEquivalentTo("False"))
			g.Expect(ready.Reason).To(Equal(v1alpha1.AwaitingApprovalReason))
			g.Expect(ready.Message).To(ContainSubstring("stackpilot.dev/approve=" + plan.ID))
			g.Expect(ready.Message).To(ContainSubstring("stackpilot approve manual"))

			previews := records(s, v1alpha1.OperationPreview)
			g.Expect(previews).To(HaveLen(1), "history: %+v", s.Status.History)
			g.Expect(previews[0].Plan).To(Equal(plan.ID))
			g.Expect(previews[0].Changes.Create).To(Equal(plan.Changes.Create))
			g.Expect(records(s, v1alpha1.OperationUp)).To(BeEmpty())
			g.Expect(s.Status.LastAttemptedRevision).To(BeEmpty(), "a preview is no attempt")
			g.Expect(s.Status.Failures).To(BeZero())

			err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "approval-managed"}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing applied: %v", err)
			g.Expect(f.planDir(s, plan.ID)).To(BeADirectory())
			g.Expect(f.ctrl.Operations(t, "up")).To(BeZero())
			g.Expect(hasLine(stackEvents(t, f.ns, key.Name), "PlanCreated: plan "+plan.ID)).To(BeTrue())

			// The endpoint serves the full Document: names, never values.
			code, body := f.getPlan(t, "/plans/"+f.ns+"/manual")
			g.Expect(code).To(Equal(200), "body: %v", body)
			g.Expect(body["id"]).To(Equal(plan.ID))
			g.Expect(body["apiVersion"]).To(Equal("plan.stackpilot.dev/v1alpha1"))
			g.Expect(body["mode"]).To(Equal("Manual"))
			g.Expect(body["resources"]).To(HaveLen(int(plan.Total)))
			code, byID := f.getPlan(t, "/plans/"+f.ns+"/manual/"+plan.ID)
			g.Expect(code).To(Equal(200))
			g.Expect(byID).To(Equal(body))
			code, body = f.getPlan(t, "/plans/"+f.ns+"/manual/plan-nope")
			g.Expect(code).To(Equal(404))
			g.Expect(body["error"]).To(ContainSubstring("no plan"))
		}},
		{"approve", func(t *testing.T) {
			g := NewWithT(t)
			approve(t, key, plan.ID)
			s = waitApplied(t, key, f.commit)
			g.Expect(configMapData(g, f.ns, "approval-managed")).To(Equal(map[string]string{"color": "blue", "copied": "v1"}))
			ups := records(s, v1alpha1.OperationUp)
			g.Expect(ups).To(HaveLen(1))
			g.Expect(ups[0].Plan).To(Equal(plan.ID))
			g.Expect(ups[0].ApprovedBy).To(Equal(approver))
			g.Expect(s.Status.History[1].Type).To(Equal(v1alpha1.OperationPreview), "preview, then up: %+v", s.Status.History)
			g.Expect(s.Status.PendingPlan).To(BeNil())
			c := conditions.Get(s, v1alpha1.PlanPendingCondition)
			g.Expect(c.Status).To(BeEquivalentTo("False"))
			g.Expect(c.Reason).To(Equal(v1alpha1.PlanAppliedReason))
			g.Expect(c.Message).To(ContainSubstring(approver))
			g.Expect(f.planDir(s, plan.ID)).NotTo(BeADirectory(), "an applied plan's files are removed")
			events := stackEvents(t, f.ns, key.Name)
			g.Expect(hasLine(events, "PlanApproved: plan "+plan.ID+" of revision main@sha1:"+f.commit+" approved by "+approver)).To(BeTrue(), "events: %v", events)
			g.Expect(hasLine(events, "PlanApplied: plan "+plan.ID)).To(BeTrue(), "events: %v", events)
		}},
		{"replace", func(t *testing.T) {
			g := NewWithT(t)
			green := f.commitColor(t, key, "green")
			s = waitPlan(t, key, green, plan.ID, v1alpha1.AwaitingApprovalReason)
			old := s.Status.PendingPlan
			g.Expect(old.Changes).To(Equal(v1alpha1.ChangeSummary{Update: 1}))
			cm := planned(old, managedCM)
			g.Expect(cm).NotTo(BeNil())
			g.Expect(cm.Op).To(Equal("update"))
			g.Expect(cm.Properties).To(Equal([]string{"data.color"}))
			g.Expect(configMapData(g, f.ns, "approval-managed")).To(HaveKeyWithValue("color", "blue"), "a plan applies nothing")

			red := f.commitColor(t, key, "red")
			s = waitPlan(t, key, red, old.ID, v1alpha1.AwaitingApprovalReason)
			plan = s.Status.PendingPlan
			g.Expect(f.planDir(s, old.ID)).NotTo(BeADirectory(), "the replaced plan's files are removed")
			g.Expect(f.planDir(s, plan.ID)).To(BeADirectory())
			events := stackEvents(t, f.ns, key.Name)
			g.Expect(hasLine(events, "PlanReplaced: plan "+old.ID)).To(BeTrue(), "events: %v", events)
			code, _ := f.getPlan(t, "/plans/"+f.ns+"/manual/"+old.ID)
			g.Expect(code).To(Equal(404))

			// Approving the replaced plan applies nothing.
			approve(t, key, old.ID)
			g.Eventually(func(g Gomega) {
				s := getStack(g, key)
				g.Expect(planPendingMessage(s)).To(ContainSubstring("names " + old.ID + ", which is not this plan"))
			}, time.Minute, 500*time.Millisecond).Should(Succeed())
			g.Eventually(func() bool { return hasLine(stackEvents(t, f.ns, key.Name), "ApprovalStale: ") }, time.Minute, 50*time.Millisecond).Should(BeTrue())
			g.Consistently(func(g Gomega) {
				g.Expect(configMapData(g, f.ns, "approval-managed")).To(HaveKeyWithValue("color", "blue"))
			}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
			s = getStack(g, key)
			g.Expect(records(s, v1alpha1.OperationUp)).To(HaveLen(1), "no up for a stale approval")
			g.Expect(s.Status.PendingPlan.ID).To(Equal(plan.ID))

			approve(t, key, plan.ID)
			s = waitApplied(t, key, red)
			g.Expect(configMapData(g, f.ns, "approval-managed")).To(HaveKeyWithValue("color", "red"))
			g.Expect(records(s, v1alpha1.OperationUp)[0].Plan).To(Equal(plan.ID))
		}},
		{"invalid", func(t *testing.T) {
			g := NewWithT(t)
			yellow := f.commitColor(t, key, "yellow")
			s = waitPlan(t, key, yellow, plan.ID, v1alpha1.AwaitingApprovalReason)
			plan = s.Status.PendingPlan
			g.Expect(planned(plan, managedCM).Properties).To(Equal([]string{"data.color"}))
			upsBefore := len(records(s, v1alpha1.OperationUp))

			// What the program reads changes after the plan: the up would
			// write copied=v2, which the plan does not hold.
			f.setSource(t, "v2")
			approve(t, key, plan.ID)
			g.Eventually(func(g Gomega) {
				s := getStack(g, key)
				ups := records(s, v1alpha1.OperationUp)
				g.Expect(len(ups)).To(BeNumerically(">", upsBefore))
				g.Expect(ups[0].Outcome).To(Equal(v1alpha1.OutcomeFailed), "up: %+v", ups[0])
				g.Expect(ups[0].Reason).To(Equal(v1alpha1.PlanInvalidReason), "up: %+v", ups[0])
				g.Expect(ups[0].Message).To(ContainSubstring("the plan is no longer valid"))
				g.Expect(ups[0].Plan).To(Equal(plan.ID))
			}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
			g.Expect(configMapData(g, f.ns, "approval-managed")).To(Equal(map[string]string{"color": "red", "copied": "v1"}), "nothing changed")

			// The retry makes a new plan, with both changes, that needs its own approval.
			s = waitPlan(t, key, yellow, plan.ID, v1alpha1.AwaitingApprovalReason)
			g.Expect(f.planDir(s, plan.ID)).NotTo(BeADirectory(), "the invalid plan's files are removed")
			next := s.Status.PendingPlan
			g.Expect(planned(next, managedCM).Properties).To(ConsistOf("data.color", "data.copied"))
			g.Expect(hasLine(stackEvents(t, f.ns, key.Name), "PlanInvalid: plan "+plan.ID)).To(BeTrue())
			g.Expect(configMapData(g, f.ns, "approval-managed")).To(HaveKeyWithValue("color", "red"), "the old approval applies nothing")

			approve(t, key, next.ID)
			waitApplied(t, key, yellow)
			g.Expect(configMapData(g, f.ns, "approval-managed")).To(Equal(map[string]string{"color": "yellow", "copied": "v2"}))
		}},
		{"deleted", func(t *testing.T) {
			g := NewWithT(t)
			purple := f.commitColor(t, key, "purple")
			s = waitPlan(t, key, purple, plan.ID, v1alpha1.AwaitingApprovalReason)
			g.Expect(f.planDir(s, s.Status.PendingPlan.ID)).To(BeADirectory())
			g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
			g.Eventually(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, key, &v1alpha1.Stack{}))
			}, time.Minute, 500*time.Millisecond).Should(BeTrue())
			g.Expect(filepath.Dir(f.planDir(s, "x"))).NotTo(BeADirectory(), "the finalizer removes a deleted Stack's plans")
		}},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			return
		}
	}
}

// TestApprovalPreviewOnly: a PreviewOnly Stack previews every change and
// never applies one, even when its plan's id is put in the approve
// annotation; switched to Auto, it applies at once, without a plan.
func TestApprovalPreviewOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := NewWithT(t)
	f := newApprovalFixture(t)
	f.start(t)
	logOnFailure(t, f.fixture)
	stack := f.approvalStack("preview", v1alpha1.ApprovalPreviewOnly)
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	s := waitPlan(t, key, f.commit, "", v1alpha1.PreviewOnlyReason)
	first := s.Status.PendingPlan
	ready := conditions.Get(s, v1alpha1.ReadyCondition)
	g.Expect(ready.Status).To(BeEquivalentTo("True"), "Ready: %s", readyMessage(s))
	g.Expect(ready.Reason).To(Equal(v1alpha1.PreviewOnlyReason))
	g.Expect(planned(first, managedCM).Op).To(Equal("create"))

	approve(t, key, first.ID) // PreviewOnly: an approval changes nothing
	green := f.commitColor(t, key, "green")
	s = waitPlan(t, key, green, first.ID, v1alpha1.PreviewOnlyReason)
	g.Expect(f.planDir(s, first.ID)).NotTo(BeADirectory())
	approve(t, key, s.Status.PendingPlan.ID)
	g.Consistently(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "approval-managed"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "PreviewOnly applies nothing: %v", err)
	}, 5*time.Second, 500*time.Millisecond).Should(Succeed())
	s = getStack(g, key)
	g.Expect(records(s, v1alpha1.OperationUp)).To(BeEmpty())
	g.Expect(records(s, v1alpha1.OperationPreview)).To(HaveLen(2))
	g.Expect(f.ctrl.Operations(t, "up")).To(BeZero())

	// Auto applies at once; the plan and PlanPending go.
	planID := s.Status.PendingPlan.ID
	patchStack(t, key, map[string]any{"spec": map[string]any{"approval": map[string]any{"mode": "Auto"}}})
	s = waitApplied(t, key, green)
	g.Expect(configMapData(g, f.ns, "approval-managed")).To(HaveKeyWithValue("color", "green"))
	g.Expect(s.Status.PendingPlan).To(BeNil())
	g.Expect(conditions.Get(s, v1alpha1.PlanPendingCondition)).To(BeNil(), "Auto has no PlanPending condition")
	up := records(s, v1alpha1.OperationUp)[0]
	g.Expect(up.Plan).To(BeEmpty())
	g.Expect(up.ApprovedBy).To(BeEmpty())
	_, err := os.Stat(f.planDir(s, planID))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the dropped plan's files are removed")
}
