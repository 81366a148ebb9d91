package stack

import (
	"context"
	"errors"
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

// statusDown is the manager's client with the API server refusing status
// writes while down is set.
type statusDown struct {
	client.Client
	down bool
}

func (c *statusDown) Status() client.SubResourceWriter {
	return statusWriter{SubResourceWriter: c.Client.Status(), c: c}
}

type statusWriter struct {
	client.SubResourceWriter
	c *statusDown
}

func (w statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if w.c.down {
		return errors.New("the API server is not reachable")
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// finalOf is what a successful rollback leaves in status (operateWith,
// rollback, summarize): its record, the applied inputs, no failure, its
// outputs, status.rollback, Ready.
func finalOf(running *v1alpha1.Stack) *v1alpha1.Stack {
	s := running.DeepCopy()
	rec := s.Status.History[0]
	done := metav1.NewTime(time.Now().Truncate(time.Second))
	rec.FinishedAt, rec.Outcome, rec.Message = &done, v1alpha1.OutcomeSucceeded, "0 created, 1 updated, 0 replaced, 0 deleted, 1 unchanged"
	s.Status.History[0] = rec
	s.Status.CurrentOperation = nil
	s.Status.LastAppliedRevision = "main@sha1:a"
	s.Status.InputsDigest = "hmac-sha256:applied"
	s.Status.Failures = 2
	s.Status.Outputs = map[string]string{"color": `"blue"`, "token": v1alpha1.SecretOutputValue}
	s.Status.Rollback = &v1alpha1.RollbackStatus{FailedRevision: "main@sha1:b", RestoredRevision: "main@sha1:a",
		At: done, Outcome: v1alpha1.OutcomeSucceeded}
	conditions.MarkFalse(s, v1alpha1.ReadyCondition, v1alpha1.RolledBackReason, "rolled back to revision main@sha1:a")
	return s
}

func expectFinal(g Gomega, got, want *v1alpha1.Stack) {
	g.Expect(got.Status.CurrentOperation).To(BeNil())
	g.Expect(got.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(want.Status.LastAppliedRevision))
	g.Expect(got.Status.InputsDigest).To(Equal(want.Status.InputsDigest))
	g.Expect(got.Status.Failures).To(Equal(want.Status.Failures))
	g.Expect(got.Status.Outputs).To(Equal(want.Status.Outputs))
	g.Expect(got.Status.Rollback).NotTo(BeNil())
	g.Expect(got.Status.Rollback.Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "a successful rollback is not read as RollbackFailed")
	g.Expect(conditions.GetReason(got, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.RolledBackReason))
}

// TestWholeOutcomeRestoredWhenTheFinalPatchFailed (issue 21, item 15): the
// rollback ran and succeeded, and the status patch that said so failed. The
// next reconcile, in this process or in the next one, puts back the whole
// outcome, not only the record: applied revision and inputs, failures,
// outputs, status.rollback and Ready.
func TestWholeOutcomeRestoredWhenTheFinalPatchFailed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		newProcess bool
	}{{"same process", false}, {"after a restart", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			r, cached, _ := recoverFixture(t)
			rec := &cached.Status.History[0]
			rec.ID, rec.Type = "rollback-1", v1alpha1.OperationRollback
			cached.Status.CurrentOperation = rec.DeepCopy()
			cached.Status.LastAppliedRevision, cached.Status.InputsDigest = "main@sha1:a", "hmac-sha256:applied"
			cached.Status.Failures = 2
			cached.Status.Rollback = &v1alpha1.RollbackStatus{FailedRevision: "main@sha1:b", RestoredRevision: "main@sha1:a",
				At: metav1.Now(), Outcome: v1alpha1.OutcomeRunning}
			putStatus(t, r.Client, cached) // the start of the rollback landed
			running := &v1alpha1.Stack{}
			g.Expect(r.Client.Get(ctx, client.ObjectKeyFromObject(cached), running)).To(Succeed())

			api := &statusDown{Client: r.Client}
			r.Client, r.OutcomesDir = api, t.TempDir()
			st := stateOf(r, running)
			want := finalOf(running)
			st.stack.Status = *want.Status.DeepCopy()
			st.operationStarted, st.lastStarted = true, "rollback-1"
			r.inflight.start(running.UID, "rollback-1")
			r.inflight.end(running.UID, st.stack.Status.History[0])
			api.down = true
			_, err := r.summarize(ctx, st, &StallingError{Reason: v1alpha1.RolledBackReason, Err: errors.New("rolled back to revision main@sha1:a")})
			g.Expect(err).To(HaveOccurred(), "the final patch failed")
			api.down = false

			if tc.newProcess {
				r = &StackReconciler{Client: api, APIReader: r.APIReader, Host: "ctrl-a", OutcomesDir: r.OutcomesDir}
			}
			fresh := &v1alpha1.Stack{}
			g.Expect(r.APIReader.Get(ctx, client.ObjectKeyFromObject(running), fresh)).To(Succeed())
			g.Expect(fresh.Status.CurrentOperation).NotTo(BeNil(), "the API server still has it running")
			st = stateOf(r, fresh)
			_, err = r.recoverInterrupted(ctx, st)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.recovered).To(BeNil(), "not interrupted")
			expectFinal(g, st.stack, want)

			// Once a final patch lands, the kept outcome goes.
			_, _ = r.summarize(ctx, st, &StallingError{Reason: v1alpha1.RolledBackReason, Err: errors.New("rolled back to revision main@sha1:a")})
			stored := &v1alpha1.Stack{}
			g.Expect(r.APIReader.Get(ctx, client.ObjectKeyFromObject(running), stored)).To(Succeed())
			expectFinal(g, stored, want)
			left, _ := filepath.Glob(filepath.Join(r.OutcomesDir, "*"))
			g.Expect(left).To(BeEmpty())
		})
	}
}

// A kept outcome of another operation than the one the API server shows
// running is stale: the operation is recovered as interrupted.
func TestStaleOutcomeIsNotRestored(t *testing.T) {
	g := NewWithT(t)
	r, cached, _ := recoverFixture(t)
	putStatus(t, r.Client, cached)
	r.OutcomesDir = t.TempDir()
	old := finalOf(cached)
	g.Expect(writeOutcome(r.outcomeFile(cached.UID), pendingOutcome{Operation: "up-0", Status: old.Status})).To(Succeed())
	fresh := &v1alpha1.Stack{}
	g.Expect(r.APIReader.Get(context.Background(), client.ObjectKeyFromObject(cached), fresh)).To(Succeed())
	st := stateOf(r, fresh)
	_, err := r.recoverInterrupted(context.Background(), st)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.recovered).NotTo(BeNil(), "interrupted")
	g.Expect(st.stack.Status.Rollback).To(BeNil())
	_, err = os.Stat(r.outcomeFile(cached.UID))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the stale file is removed")
}
