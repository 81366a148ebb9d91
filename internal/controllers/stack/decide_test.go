package stack

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	applied := decideInput{
		Revision: "main@sha1:b", ProgramDigest: "sha256:p2", InputsDigest: "sha256:2",
		LastAppliedRevision: "main@sha1:b", LastAppliedProgramDigest: "sha256:p2", LastAppliedInputsDigest: "sha256:2",
		LastAttemptedProgramDigest: "sha256:p2", LastAttemptedInputsDigest: "sha256:2",
		LastAttemptFinished: now.Add(-time.Hour),
		Now:                 now, RetryInterval: time.Minute, Interval: 10 * time.Minute,
	}
	// The up of program p2 at revision b failed three times; p1 (at a) is applied.
	failed := applied
	failed.LastAppliedRevision, failed.LastAppliedProgramDigest = "main@sha1:a", "sha256:p1"
	failed.Failures = 3
	failed.LastAttemptFinished = now.Add(-time.Minute)

	tests := []struct {
		name   string
		mutate func(*decideInput)
		base   decideInput
		want   Action
		after  time.Duration
	}{
		{name: "nothing changed runs nothing", base: applied, want: ActionNone},
		// A failed remediate (at the applied program and inputs) is retried
		// as a remediate, with the backoff of any failure.
		{name: "failed remediate, retry due: remediate", base: applied, mutate: func(in *decideInput) {
			in.Failures, in.LastAttemptRemediate, in.LastAttemptFinished = 1, true, now.Add(-2*time.Minute)
		}, want: ActionRemediate},
		{name: "failed remediate, retry not due: wait", base: applied, mutate: func(in *decideInput) {
			in.Failures, in.LastAttemptRemediate, in.LastAttemptFinished = 2, true, now.Add(-time.Minute)
		}, want: ActionWait, after: time.Minute},
		{name: "interrupted remediate runs again as a remediate", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.LastAttemptRemediate = true, 1, true
		}, want: ActionRemediate},
		{name: "failed remediate, then new inputs: up", base: applied, mutate: func(in *decideInput) {
			in.Failures, in.LastAttemptRemediate, in.InputsDigest = 1, true, "sha256:3"
		}, want: ActionUp},
		// Turning remediation off (mode Detect or Disabled) stops a failing
		// remediate: its program and inputs are the applied ones.
		{name: "failed remediate, remediation turned off: nothing", base: applied, mutate: func(in *decideInput) {
			in.Failures, in.RemediateOff, in.LastAttemptFinished = 1, true, now.Add(-time.Hour)
		}, want: ActionNone},
		{name: "failed remediate, remediation turned off, requested: nothing", base: applied, mutate: func(in *decideInput) {
			in.Failures, in.RemediateOff, in.Requested = 3, true, true
		}, want: ActionNone},
		{name: "interrupted remediate, remediation turned off: nothing", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.RemediateOff = true, 1, true
		}, want: ActionNone},
		{name: "failed remediate, remediation turned off, new revision with the same program: skipped", base: applied, mutate: func(in *decideInput) {
			in.Failures, in.RemediateOff, in.Revision = 1, true, "main@sha1:c"
		}, want: ActionSkip},
		{name: "failed remediate, remediation turned off, then new inputs: up", base: applied, mutate: func(in *decideInput) {
			in.Failures, in.RemediateOff, in.InputsDigest = 1, true, "sha256:3"
		}, want: ActionUp},
		{name: "first apply", base: decideInput{Revision: "main@sha1:a", ProgramDigest: "sha256:p1", InputsDigest: "sha256:1", Now: now}, want: ActionUp},
		{name: "new revision, same program: skipped", base: applied, mutate: func(in *decideInput) { in.Revision = "main@sha1:c" }, want: ActionSkip},
		{name: "new revision, program changed", base: applied, mutate: func(in *decideInput) {
			in.Revision, in.ProgramDigest = "main@sha1:c", "sha256:p3"
		}, want: ActionUp},
		// An include path's content, or the list itself, changes the program digest
		// (the list is in the inputs digest too).
		{name: "include changed, same revision", base: applied, mutate: func(in *decideInput) {
			in.ProgramDigest, in.InputsDigest = "sha256:p3", "sha256:3"
		}, want: ActionUp},
		{name: "new inputs", base: applied, mutate: func(in *decideInput) { in.InputsDigest = "sha256:3" }, want: ActionUp},
		{name: "new inputs, new revision, same program", base: applied, mutate: func(in *decideInput) {
			in.Revision, in.InputsDigest = "main@sha1:c", "sha256:3"
		}, want: ActionUp},
		{name: "requested at a skipped revision runs nothing", base: applied, mutate: func(in *decideInput) {
			in.Revision, in.LastAppliedRevision, in.Requested = "main@sha1:c", "main@sha1:c", true
		}, want: ActionNone},
		{name: "interrupted runs again", base: applied, mutate: func(in *decideInput) { in.Interrupted, in.Failures = true, 1 }, want: ActionUp},
		{name: "interrupted, new revision with the same program still runs again", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.Revision = true, 1, "main@sha1:c"
		}, want: ActionUp},
		// An interruption counts as a failed attempt (recoverInterrupted adds
		// it to Failures and finishes its record now): the second in a row backs off.
		{name: "second interruption in a row backs off", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.LastAttemptFinished = true, 2, now
		}, want: ActionWait, after: 2 * time.Minute},
		{name: "interrupted after a failure backs off", base: failed, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.LastAttemptFinished = true, 4, now
		}, want: ActionWait, after: 8 * time.Minute},
		{name: "interrupted, backoff over", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.LastAttemptFinished = true, 3, now.Add(-5*time.Minute)
		}, want: ActionUp},
		{name: "interrupted twice, program changed runs at once", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.LastAttemptFinished, in.Revision, in.ProgramDigest = true, 2, now, "main@sha1:n", "sha256:pn"
		}, want: ActionUp},
		{name: "interrupted twice, new revision with the same program backs off", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.LastAttemptFinished, in.Revision = true, 2, now, "main@sha1:n"
		}, want: ActionWait, after: 2 * time.Minute},
		{name: "requested with nothing changed still runs nothing", base: applied, mutate: func(in *decideInput) { in.Requested = true }, want: ActionNone},
		{name: "failed, retry not due: 3rd failure waits 4m", base: failed, want: ActionWait, after: 3 * time.Minute},
		{name: "failed, retry due", base: failed, mutate: func(in *decideInput) { in.LastAttemptFinished = now.Add(-5 * time.Minute) }, want: ActionUp},
		{name: "failed, program changed runs at once despite backoff", base: failed, mutate: func(in *decideInput) {
			in.Revision, in.ProgramDigest = "main@sha1:z", "sha256:pz"
		}, want: ActionUp},
		{name: "failed, program reverted to the applied one runs at once", base: failed, mutate: func(in *decideInput) {
			in.Revision, in.ProgramDigest = "main@sha1:z", "sha256:p1"
		}, want: ActionUp},
		{name: "failed, new revision with the same program keeps the backoff", base: failed, mutate: func(in *decideInput) { in.Revision = "main@sha1:z" }, want: ActionWait, after: 3 * time.Minute},
		{name: "failed, new revision with the same program, retry due", base: failed, mutate: func(in *decideInput) {
			in.Revision, in.LastAttemptFinished = "main@sha1:z", now.Add(-5*time.Minute)
		}, want: ActionUp},
		{name: "failed, spec change runs at once despite backoff", base: failed, mutate: func(in *decideInput) { in.InputsDigest = "sha256:9" }, want: ActionUp},
		{name: "failed, reconcile requested skips the backoff", base: failed, mutate: func(in *decideInput) { in.Requested = true }, want: ActionUp},
		// A policy that stopped the up changed (fixed, relaxed, deleted):
		// the up runs again at once, not after the backoff.
		{name: "failed, the policies that stopped it changed: retried at once", base: failed, mutate: func(in *decideInput) { in.PolicyChanged = true }, want: ActionUp},
		// Applied before program digests were recorded, at another revision:
		// nothing to compare with, so one up.
		{name: "no program digest recorded, new revision", base: applied, mutate: func(in *decideInput) {
			in.Revision, in.LastAppliedProgramDigest, in.LastAttemptedProgramDigest = "main@sha1:c", "", ""
		}, want: ActionUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in := tt.base
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			got := decide(in)
			g.Expect(got.Action).To(Equal(tt.want), got.Why)
			if tt.want == ActionWait {
				g.Expect(got.RequeueAfter).To(Equal(tt.after))
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	g := NewWithT(t)
	var got []time.Duration
	for f := int64(1); f <= 6; f++ {
		got = append(got, backoff(f, time.Minute, 10*time.Minute))
	}
	g.Expect(got).To(Equal([]time.Duration{
		time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute,
	}))
	g.Expect(backoff(5, 5*time.Minute, time.Minute)).To(Equal(5*time.Minute), "cap is never below retryInterval")
}

func TestDecideRollback(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// Program p2 at revision b failed once; p1 (at a) is applied; rollback
	// after one failure.
	failed := decideInput{
		Revision: "main@sha1:b", ProgramDigest: "sha256:p2", InputsDigest: "sha256:1",
		LastAppliedRevision: "main@sha1:a", LastAppliedProgramDigest: "sha256:p1", LastAppliedInputsDigest: "sha256:1",
		LastAttemptedProgramDigest: "sha256:p2", LastAttemptedInputsDigest: "sha256:1",
		Failures: 1, LastAttemptFinished: now,
		RollbackAfter: 1, HasApplied: true,
		LastAttemptType: v1alpha1.OperationUp, LastAttemptOutcome: v1alpha1.OutcomeFailed,
		Now: now, RetryInterval: time.Minute, Interval: 10 * time.Minute,
	}
	// The rollback of that change succeeded; the change is resolved still.
	rolledBack := failed
	rolledBack.LastAttemptType, rolledBack.LastAttemptOutcome, rolledBack.RolledBack = v1alpha1.OperationRollback, v1alpha1.OutcomeSucceeded, true

	tests := []struct {
		name   string
		base   decideInput
		mutate func(*decideInput)
		want   Action
	}{
		{name: "failed up of a new program: rollback at once, whatever the backoff", base: failed, want: ActionRollback},
		{name: "failed up of new inputs: rollback", base: failed, mutate: func(in *decideInput) {
			in.ProgramDigest, in.LastAttemptedProgramDigest, in.InputsDigest, in.LastAttemptedInputsDigest = "sha256:p1", "sha256:p1", "sha256:2", "sha256:2"
		}, want: ActionRollback},
		{name: "rollback off: the backoff", base: failed, mutate: func(in *decideInput) { in.RollbackAfter = 0 }, want: ActionWait},
		{name: "fewer failures than afterFailures: the backoff", base: failed, mutate: func(in *decideInput) { in.RollbackAfter = 3; in.Failures = 2 }, want: ActionWait},
		{name: "afterFailures reached", base: failed, mutate: func(in *decideInput) { in.RollbackAfter = 3; in.Failures = 3 }, want: ActionRollback},
		{name: "nothing applied before: nothing to roll back to", base: failed, mutate: func(in *decideInput) { in.HasApplied = false }, want: ActionWait},
		{name: "failed at the applied program and inputs: not a new change", base: failed, mutate: func(in *decideInput) {
			in.ProgramDigest, in.LastAttemptedProgramDigest = "sha256:p1", "sha256:p1"
		}, want: ActionWait},
		{name: "a newer change came: it runs", base: failed, mutate: func(in *decideInput) { in.Revision, in.ProgramDigest = "main@sha1:c", "sha256:p3" }, want: ActionUp},
		{name: "an up refused by its lock or backend changed nothing: the backoff", base: failed, mutate: func(in *decideInput) { in.LastAttemptOutcome = "" }, want: ActionWait},
		{name: "interrupted up: runs again, no rollback", base: failed, mutate: func(in *decideInput) {
			in.LastAttemptOutcome, in.Interrupted = v1alpha1.OutcomeInterrupted, true
		}, want: ActionUp},
		{name: "failed remediate: not a change to roll back", base: failed, mutate: func(in *decideInput) { in.LastAttemptType = v1alpha1.OperationRemediate }, want: ActionWait},

		{name: "rolled back: held", base: rolledBack, want: ActionRolledBack},
		{name: "rolled back, retry due by the backoff: still held", base: rolledBack, mutate: func(in *decideInput) { in.LastAttemptFinished = now.Add(-time.Hour) }, want: ActionRolledBack},
		{name: "rolled back, new revision with the same program: held", base: rolledBack, mutate: func(in *decideInput) { in.Revision = "main@sha1:c" }, want: ActionRolledBack},
		{name: "rolled back, new program: runs", base: rolledBack, mutate: func(in *decideInput) {
			in.Revision, in.ProgramDigest, in.RolledBack = "main@sha1:c", "sha256:p3", false
		}, want: ActionUp},
		{name: "rolled back, new inputs: runs", base: rolledBack, mutate: func(in *decideInput) { in.InputsDigest, in.RolledBack = "sha256:3", false }, want: ActionUp},
		{name: "rolled back, reverted to the applied program: runs", base: rolledBack, mutate: func(in *decideInput) {
			in.Revision, in.ProgramDigest, in.RolledBack = "main@sha1:c", "sha256:p1", false
		}, want: ActionUp},
		{name: "rolled back, reconcile requested: the change is tried again", base: rolledBack, mutate: func(in *decideInput) { in.Requested = true }, want: ActionUp},
		{name: "rolled back, then rollback turned off: tried again after the backoff", base: rolledBack, mutate: func(in *decideInput) {
			in.RollbackAfter, in.LastAttemptFinished = 0, now.Add(-time.Hour)
		}, want: ActionUp},
		{name: "tried again on request and failed again: rolled back again", base: failed, mutate: func(in *decideInput) { in.Failures, in.RolledBack = 2, true }, want: ActionRollback},
		{name: "rollback failed: held, never looped", base: rolledBack, mutate: func(in *decideInput) {
			in.LastAttemptOutcome, in.LastAttemptFinished = v1alpha1.OutcomeFailed, now.Add(-time.Hour)
		}, want: ActionRolledBack},
		{name: "rollback failed, reconcile requested: the change is tried again", base: rolledBack, mutate: func(in *decideInput) {
			in.LastAttemptOutcome, in.Requested = v1alpha1.OutcomeFailed, true
		}, want: ActionUp},
		{name: "rollback refused by a policy that changed since: the change is tried again", base: rolledBack, mutate: func(in *decideInput) {
			in.LastAttemptOutcome, in.PolicyChanged = v1alpha1.OutcomeFailed, true
		}, want: ActionUp},
		{name: "rollback succeeded, policies changed: still held", base: rolledBack, mutate: func(in *decideInput) {
			in.PolicyChanged = true
		}, want: ActionRolledBack},
		{name: "rollback interrupted: runs again", base: rolledBack, mutate: func(in *decideInput) {
			in.LastAttemptOutcome, in.Interrupted, in.InterruptedRollbacks = v1alpha1.OutcomeInterrupted, true, 1
		}, want: ActionRollback},
		{name: "rollback interrupted twice in a row: held", base: rolledBack, mutate: func(in *decideInput) {
			in.LastAttemptOutcome, in.Interrupted, in.InterruptedRollbacks = v1alpha1.OutcomeInterrupted, true, 2
		}, want: ActionRolledBack},
		{name: "rollback interrupted, then a new commit: the commit runs", base: rolledBack, mutate: func(in *decideInput) {
			in.LastAttemptOutcome, in.Interrupted, in.InterruptedRollbacks = v1alpha1.OutcomeInterrupted, true, 1
			in.Revision, in.ProgramDigest, in.RolledBack = "main@sha1:c", "sha256:p3", false
		}, want: ActionUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in := tt.base
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			got := decide(in)
			g.Expect(got.Action).To(Equal(tt.want), got.Why)
		})
	}
}
