package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
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
