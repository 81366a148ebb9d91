package stack

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestDecideStepStopsFailingRemediate: a remediate failed twice at the
// applied program and inputs. While the mode is Remediate it is retried (as
// a remediate); once the mode is Detect or Disabled the decide step answers
// nothing to do, and the first steps of that route find the Stack Ready at
// its applied revision, clear the failure count and say so once.
func TestDecideStepStopsFailingRemediate(t *testing.T) {
	finished := metav1.NewTime(time.Now().Add(-time.Hour))
	stack := func(mode v1alpha1.DriftMode) *v1alpha1.Stack {
		s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: v1alpha1.StackSpec{DriftDetection: &v1alpha1.DriftDetection{Mode: mode}}}
		s.Status = v1alpha1.StackStatus{
			LastAppliedRevision: "main@sha1:a", LastAppliedProgramDigest: "sha256:p", InputsDigest: "hmac:i",
			LastAttemptedRevision: "main@sha1:a", LastAttemptedProgramDigest: "sha256:p", LastAttemptedInputsDigest: "hmac:i",
			Failures: 2,
			History: []v1alpha1.OperationRecord{{ID: "remediate-2", Type: v1alpha1.OperationRemediate, Revision: "main@sha1:a",
				StartedAt: finished, FinishedAt: &finished, Outcome: v1alpha1.OutcomeFailed, Reason: v1alpha1.ProgramErrorReason}},
		}
		conditions.MarkFalse(s, v1alpha1.ReadyCondition, v1alpha1.ProgramErrorReason, "remediate failed")
		return s
	}
	run := func(s *v1alpha1.Stack) (*reconcileState, *record.FakeRecorder) {
		events := record.NewFakeRecorder(10)
		r := &StackReconciler{EventRecorder: events}
		st := &reconcileState{stack: s, revision: "main@sha1:a", programDigest: "sha256:p", inputs: &inputs{Digest: "hmac:i"}}
		_, err := r.decide(context.Background(), st)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		if st.decision.Action == ActionNone {
			// The route's steps before its drift check (route.go).
			for _, step := range []stepFunc{r.settle, r.upToDate} {
				_, err := step(context.Background(), st)
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
			}
			st.writeFindings()
		}
		return st, events
	}

	t.Run("Remediate: retried as a remediate", func(t *testing.T) {
		st, _ := run(stack(v1alpha1.DriftRemediate))
		NewWithT(t).Expect(st.decision.Action).To(Equal(ActionRemediate))
	})
	for _, mode := range []v1alpha1.DriftMode{v1alpha1.DriftDetect, v1alpha1.DriftDisabled} {
		t.Run(string(mode)+": stopped", func(t *testing.T) {
			g := NewWithT(t)
			s := stack(mode)
			st, events := run(s)
			g.Expect(st.decision.Action).To(Equal(ActionNone), st.decision.Why)
			g.Expect(conditions.IsReady(s)).To(BeTrue())
			g.Expect(s.Status.Failures).To(BeZero())
			g.Expect(events.Events).To(Receive(ContainSubstring("RemediateStopped")))

			// The next reconcile: still nothing, and no second event.
			st, events = run(s)
			g.Expect(st.decision.Action).To(Equal(ActionNone))
			g.Expect(events.Events).NotTo(Receive())
		})
	}
}
