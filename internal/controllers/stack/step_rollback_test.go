package stack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// recordingExecutor returns outcome for every operation and keeps the specs
// it was given (the runner and Pulumi are not what these tests are about).
type recordingExecutor struct {
	outcome runner.Outcome
	specs   []runner.Spec
}

func (e *recordingExecutor) Run(_ context.Context, spec runner.Spec) (runner.Result, error) {
	e.specs = append(e.specs, spec)
	res := runner.Result{APIVersion: runner.APIVersion, ID: spec.ID, Type: spec.Type, Outcome: e.outcome,
		StartedAt: time.Now(), FinishedAt: time.Now()}
	if e.outcome != runner.OutcomeSucceeded {
		res.ErrorClass, res.Message = runner.ErrorProgram, "error: the old program failed with s3cret-new and s3cret-old"
	}
	return res, nil
}

// rollbackFixture: revision a (program p1, inputs d1: color green) is
// applied; the up of revision b (program p2, inputs d2: color red) failed
// once; rollback is on.
func rollbackFixture(t *testing.T, outcome runner.Outcome, keep bool) (*StackReconciler, *reconcileState, *recordingExecutor) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)

	src := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(src, "app"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(src, "app", "Pulumi.yaml"), []byte("name: app\nruntime: yaml\n"), 0o644)).To(Succeed())
	store, err := artifact.NewStore(filepath.Join(t.TempDir(), "artifacts"))
	g.Expect(err).NotTo(HaveOccurred())
	art, err := store.Put(ctx, src)
	g.Expect(err).NotTo(HaveOccurred())

	failedAt := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "infra", UID: "uid-r"},
		Spec: v1alpha1.StackSpec{
			Source:   v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://example.com/r.git"}, Dir: "app"},
			Rollback: &v1alpha1.Rollback{Enabled: true, AfterFailures: 1},
		}}
	stack.Status = v1alpha1.StackStatus{
		LastAppliedRevision: "main@sha1:a", LastAppliedProgramDigest: "sha256:p1", InputsDigest: "hmac-sha256:d1",
		LastAppliedArtifact:   &v1alpha1.ArtifactReference{Revision: "main@sha1:a", Digest: art.Digest},
		LastAttemptedRevision: "main@sha1:b", LastAttemptedProgramDigest: "sha256:p2", LastAttemptedInputsDigest: "hmac-sha256:d2",
		LastAttemptedArtifact: &v1alpha1.ArtifactReference{Revision: "main@sha1:b", Digest: "sha256:bbbb"},
		Failures:              1,
		History: []v1alpha1.OperationRecord{{ID: "up-b", Type: v1alpha1.OperationUp, Revision: "main@sha1:b",
			StartedAt: failedAt, FinishedAt: &failedAt, Outcome: v1alpha1.OutcomeFailed, Reason: v1alpha1.ProgramErrorReason}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack).WithStatusSubresource(stack).Build()
	exec := &recordingExecutor{outcome: outcome}
	r := &StackReconciler{Client: c, APIReader: c, Config: Config{Executor: exec}, Artifacts: store, WorkDir: t.TempDir(),
		InputsDir: t.TempDir(), DigestKey: staticDigestKey(bytes.Repeat([]byte{3}, digestKeySize)), Host: "ctrl"}
	old := &inputs{Backend: "file:///state", Digest: "hmac-sha256:d1",
		Config:  []runner.ConfigValue{{Key: "color", Value: "green"}, {Key: "token", Value: "s3cret-old", Secret: true}},
		Env:     map[string]string{"PULUMI_CONFIG_PASSPHRASE": "pass-old"},
		Secrets: []string{"s3cret-old", "pass-old"}}
	if keep {
		g.Expect(r.writeInputs(ctx, stack.UID, old)).To(Succeed())
	}
	st := stateOf(r, stack)
	st.revision, st.programDigest = "main@sha1:b", "sha256:p2"
	st.inputs = &inputs{Backend: "file:///state", Digest: "hmac-sha256:d2",
		Config:  []runner.ConfigValue{{Key: "color", Value: "red"}, {Key: "token", Value: "s3cret-new", Secret: true}},
		Env:     map[string]string{"PULUMI_CONFIG_PASSPHRASE": "pass-new"},
		Secrets: []string{"s3cret-new", "pass-new"}}
	return r, st, exec
}

// decideNow is decide's verdict on st as the decide step sees it.
func decideNow(st *reconcileState) decision {
	s := st.stack.Status
	in := decideInput{Revision: st.revision, ProgramDigest: st.programDigest, InputsDigest: st.inputs.Digest,
		LastAppliedRevision: s.LastAppliedRevision, LastAppliedProgramDigest: s.LastAppliedProgramDigest, LastAppliedInputsDigest: s.InputsDigest,
		LastAttemptedProgramDigest: s.LastAttemptedProgramDigest, LastAttemptedInputsDigest: s.LastAttemptedInputsDigest,
		Failures: s.Failures, LastAttemptFinished: lastAttemptFinished(st.stack), Now: time.Now().Add(time.Hour),
		RetryInterval: time.Second, Interval: time.Minute}
	rollbackInput(st.stack, st, &in)
	return decide(in)
}

// TestRollbackAppliesTheLastAppliedInputs: the rollback runs the applied
// program with the inputs kept at its up (not the failing ones), is recorded
// as a rollback, keeps the failed change attempted and unfixed, and the
// change is then held.
func TestRollbackAppliesTheLastAppliedInputs(t *testing.T) {
	g := NewWithT(t)
	r, st, exec := rollbackFixture(t, runner.OutcomeSucceeded, true)
	g.Expect(decideNow(st).Action).To(Equal(ActionRollback))
	st.decision = decideNow(st)

	res, err := r.act(context.Background(), st)
	g.Expect(res).To(Equal(stepDone))
	var stall *StallingError
	g.Expect(errors.As(err, &stall)).To(BeTrue(), "%v", err)
	g.Expect(stall.Reason).To(Equal(v1alpha1.RolledBackReason))
	g.Expect(stall.Error()).To(ContainSubstring("main@sha1:a"))
	g.Expect(stall.Error()).To(ContainSubstring("main@sha1:b"))

	g.Expect(exec.specs).To(HaveLen(1))
	spec := exec.specs[0]
	g.Expect(spec.Type).To(Equal(runner.OpUp))
	g.Expect(spec.Config).To(ContainElement(runner.ConfigValue{Key: "color", Value: "green"}), "the applied inputs, not the failing ones")
	g.Expect(spec.Env).To(HaveKeyWithValue("PULUMI_CONFIG_PASSPHRASE", "pass-old"))

	s := st.stack.Status
	g.Expect(s.History[0].Type).To(Equal(v1alpha1.OperationRollback))
	g.Expect(s.History[0].Revision).To(Equal("main@sha1:a"))
	g.Expect(s.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	g.Expect(s.History[1].ID).To(Equal("up-b"))
	g.Expect(s.LastAppliedRevision).To(Equal("main@sha1:a"))
	g.Expect(s.InputsDigest).To(Equal("hmac-sha256:d1"))
	g.Expect(s.LastAttemptedRevision).To(Equal("main@sha1:b"), "the failed change is the attempted one still")
	g.Expect(s.LastAttemptedProgramDigest).To(Equal("sha256:p2"))
	g.Expect(s.LastAttemptedInputsDigest).To(Equal("hmac-sha256:d2"))
	g.Expect(s.LastAttemptedArtifact.Revision).To(Equal("main@sha1:b"))
	g.Expect(s.Failures).To(Equal(int64(1)), "and not fixed")
	g.Expect(s.Rollback).To(gstruct.PointTo(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
		"FailedRevision": Equal("main@sha1:b"), "FailedProgramDigest": Equal("sha256:p2"), "FailedInputsDigest": Equal("hmac-sha256:d2"),
		"RestoredRevision": Equal("main@sha1:a"), "RestoredInputsDigest": Equal("hmac-sha256:d1"), "Outcome": Equal(v1alpha1.OutcomeSucceeded),
	})))

	g.Expect(decideNow(st).Action).To(Equal(ActionRolledBack), "the change is held, the retry backoff long over")
	st.decision = decideNow(st)
	_, err = r.act(context.Background(), st)
	g.Expect(errors.As(err, &stall)).To(BeTrue())
	g.Expect(stall.Reason).To(Equal(v1alpha1.RolledBackReason))
	g.Expect(exec.specs).To(HaveLen(1), "held: nothing runs")
}

// TestRollbackFailedIsHeld: a failed rollback is RollbackFailed, scrubbed of
// both inputs' secrets, and not run again.
func TestRollbackFailedIsHeld(t *testing.T) {
	g := NewWithT(t)
	r, st, exec := rollbackFixture(t, runner.OutcomeFailed, true)
	st.decision = decideNow(st)
	g.Expect(st.decision.Action).To(Equal(ActionRollback))
	_, err := r.act(context.Background(), st)
	var stall *StallingError
	g.Expect(errors.As(err, &stall)).To(BeTrue(), "%v", err)
	g.Expect(stall.Reason).To(Equal(v1alpha1.RollbackFailedReason))
	g.Expect(stall.Error()).To(ContainSubstring("the old program failed"))
	g.Expect(stall.Error()).NotTo(Or(ContainSubstring("s3cret-new"), ContainSubstring("s3cret-old")))
	g.Expect(st.stack.Status.History[0].Message).NotTo(Or(ContainSubstring("s3cret-new"), ContainSubstring("s3cret-old")))
	g.Expect(st.stack.Status.Rollback.Outcome).To(Equal(v1alpha1.OutcomeFailed))
	g.Expect(st.stack.Status.Failures).To(Equal(int64(1)), "the rollback's failure is not the change's")
	g.Expect(st.requeueAfter).To(BeZero(), "no retry of the rollback")
	g.Expect(decideNow(st).Action).To(Equal(ActionRolledBack))
	g.Expect(exec.specs).To(HaveLen(1))
}

// TestRollbackRefusedWithoutTheInputs: with the inputs changed and none kept
// (a new data dir), no rollback runs, and it says why.
func TestRollbackRefusedWithoutTheInputs(t *testing.T) {
	g := NewWithT(t)
	r, st, exec := rollbackFixture(t, runner.OutcomeSucceeded, false)
	st.decision = decideNow(st)
	_, err := r.act(context.Background(), st)
	var stall *StallingError
	g.Expect(errors.As(err, &stall)).To(BeTrue(), "%v", err)
	g.Expect(stall.Reason).To(Equal(v1alpha1.RollbackFailedReason))
	g.Expect(stall.Error()).To(ContainSubstring("the inputs of revision main@sha1:a are not kept (data dir reset"))
	g.Expect(exec.specs).To(BeEmpty())
	g.Expect(st.stack.Status.History[0].Type).To(Equal(v1alpha1.OperationRollback))
	g.Expect(st.stack.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeFailed))
	g.Expect(decideNow(st).Action).To(Equal(ActionRolledBack))

	// Only the revision changed: the inputs resolved now are the applied ones.
	r, st, exec = rollbackFixture(t, runner.OutcomeSucceeded, false)
	st.inputs.Digest, st.inputs.Config = "hmac-sha256:d1", []runner.ConfigValue{{Key: "color", Value: "green"}}
	st.stack.Status.LastAttemptedInputsDigest = "hmac-sha256:d1"
	st.decision = decideNow(st)
	g.Expect(st.decision.Action).To(Equal(ActionRollback))
	_, err = r.act(context.Background(), st)
	g.Expect(errors.As(err, &stall)).To(BeTrue(), "%v", err)
	g.Expect(stall.Reason).To(Equal(v1alpha1.RolledBackReason))
	g.Expect(exec.specs).To(HaveLen(1))
}

// TestCutShortRollbackRunsAgainOnce: a rollback the controller cut short
// runs again once, keeping the failed change's revision and failure count,
// and a second cut in a row is held as failed. Two ways to be cut short:
//   - crash: a dead controller left it unfinished (recoverInterrupted
//     recorded it interrupted); while it ran the attempted revision was the
//     restored one, so the failed change comes from status.rollback;
//   - shutdown: the controller's shutdown cancelled it (recorded cancelled
//     with reason Interrupted, status.rollback interrupted); the failed
//     change was put back as the attempted one, its failures not counted.
func TestCutShortRollbackRunsAgainOnce(t *testing.T) {
	for _, tc := range []struct {
		name         string
		outcome      v1alpha1.OperationOutcome // of the cut-short record
		rollback     v1alpha1.OperationOutcome // status.rollback's, after the cut
		restoredRan  bool                      // the attempted revision is the restored one
		failures     int64
		wantArtifact string // the attempted artifact after the rerun; "" = not checked
	}{
		{name: "crash", outcome: v1alpha1.OutcomeInterrupted, rollback: v1alpha1.OutcomeRunning, restoredRan: true, failures: 1},
		{name: "shutdown", outcome: v1alpha1.OutcomeCancelled, rollback: v1alpha1.OutcomeInterrupted, failures: 2, wantArtifact: "sha256:bbbb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, st, exec := rollbackFixture(t, runner.OutcomeSucceeded, true)
			s := &st.stack.Status
			at := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
			cut := v1alpha1.OperationRecord{ID: "rollback-1", Type: v1alpha1.OperationRollback, Revision: "main@sha1:a",
				StartedAt: at, FinishedAt: &at, Outcome: tc.outcome, Reason: v1alpha1.InterruptedReason}
			s.History = append([]v1alpha1.OperationRecord{cut}, s.History...)
			s.Rollback = &v1alpha1.RollbackStatus{FailedRevision: "main@sha1:b", FailedProgramDigest: "sha256:p2", FailedInputsDigest: "hmac-sha256:d2",
				RestoredRevision: "main@sha1:a", RestoredInputsDigest: "hmac-sha256:d1", At: at, Outcome: tc.rollback}
			if tc.restoredRan {
				s.LastAttemptedRevision, s.LastAttemptedProgramDigest, s.LastAttemptedInputsDigest = "main@sha1:a", "sha256:p1", "hmac-sha256:d1"
			}
			s.Failures = tc.failures

			st.decision = decideNow(st)
			g.Expect(st.decision.Action).To(Equal(ActionRollback), st.decision.Why)
			_, err := r.act(context.Background(), st)
			var stall *StallingError
			g.Expect(errors.As(err, &stall)).To(BeTrue(), "%v", err)
			g.Expect(stall.Reason).To(Equal(v1alpha1.RolledBackReason))
			g.Expect(exec.specs).To(HaveLen(1))
			g.Expect(s.Rollback.FailedRevision).To(Equal("main@sha1:b"))
			g.Expect(s.LastAttemptedRevision).To(Equal("main@sha1:b"))
			g.Expect(s.LastAttemptedProgramDigest).To(Equal("sha256:p2"))
			g.Expect(s.Failures).To(Equal(tc.failures), "the failed change's count")
			if tc.wantArtifact != "" {
				g.Expect(s.LastAttemptedArtifact.Digest).To(Equal(tc.wantArtifact), "the failed change's artifact is kept")
			}
			g.Expect(decideNow(st).Action).To(Equal(ActionRolledBack))

			// Cut short twice in a row: held, and reported as a failed rollback.
			second := cut
			second.ID = "rollback-2"
			s.History = append([]v1alpha1.OperationRecord{second, cut}, s.History[1:]...)
			s.Rollback.Outcome = tc.rollback
			st.decision = decideNow(st)
			g.Expect(st.decision.Action).To(Equal(ActionRolledBack))
			_, err = r.act(context.Background(), st)
			g.Expect(errors.As(err, &stall)).To(BeTrue(), "%v", err)
			g.Expect(stall.Reason).To(Equal(v1alpha1.RollbackFailedReason))
			g.Expect(s.Rollback.Outcome).To(Equal(v1alpha1.OutcomeInterrupted))
			g.Expect(exec.specs).To(HaveLen(1))
		})
	}
}

// TestRollbackUsesTodaysIdentity: the last good apply acted as the
// controller (no ServiceAccount); an admin has since set
// --default-service-account. The rollback resolves its identity by today's
// rules: it never runs with the controller's own cluster credentials.
func TestRollbackUsesTodaysIdentity(t *testing.T) {
	g := NewWithT(t)
	r, st, exec := rollbackFixture(t, runner.OutcomeSucceeded, true) // kept inputs: no ServiceAccount
	r.Tenancy = Tenancy{OwnClusterEnv: map[string]string{"KUBECONFIG": "/controller/kubeconfig"}}
	st.inputs.ServiceAccount = "deployer" // resolved now
	st.decision = decideNow(st)
	g.Expect(st.decision.Action).To(Equal(ActionRollback))

	_, _ = r.act(context.Background(), st)
	for _, spec := range exec.specs {
		g.Expect(spec.Env).NotTo(HaveKeyWithValue("KUBECONFIG", "/controller/kubeconfig"), "the rollback acts as the controller")
	}
	g.Expect(st.inputs.ServiceAccount).To(Equal("deployer"), "the resolved inputs are given back")

	restored := &inputs{ServiceAccount: "", Secrets: []string{"old"}}
	run := rollbackInputs(restored, &inputs{ServiceAccount: "deployer", Secrets: []string{"new"}})
	g.Expect(run.ServiceAccount).To(Equal("deployer"))
	g.Expect(run.Secrets).To(ConsistOf("old", "new"))
	g.Expect(restored.ServiceAccount).To(BeEmpty(), "the kept inputs are not changed")
	g.Expect(rollbackInputs(&inputs{ServiceAccount: "old-sa"}, &inputs{}).ServiceAccount).To(BeEmpty(),
		"a ServiceAccount no longer named acts as today's rules say")
}
