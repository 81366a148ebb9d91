package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	applied := decideInput{
		Revision: "main@sha1:b", InputsDigest: "sha256:2",
		LastAppliedRevision: "main@sha1:b", LastAppliedInputsDigest: "sha256:2",
		LastAttemptedRevision: "main@sha1:b", LastAttemptedInputsDigest: "sha256:2",
		LastAttemptFinished: now.Add(-time.Hour),
		Now:                 now, RetryInterval: time.Minute, Interval: 10 * time.Minute,
	}
	failed := applied
	failed.LastAppliedRevision = "main@sha1:a"
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
		{name: "first apply", base: decideInput{Revision: "main@sha1:a", InputsDigest: "sha256:1", Now: now}, want: ActionUp},
		{name: "new revision", base: applied, mutate: func(in *decideInput) { in.Revision = "main@sha1:c" }, want: ActionUp},
		{name: "new inputs", base: applied, mutate: func(in *decideInput) { in.InputsDigest = "sha256:3" }, want: ActionUp},
		{name: "interrupted runs again", base: applied, mutate: func(in *decideInput) { in.Interrupted, in.Failures = true, 1 }, want: ActionUp},
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
		{name: "interrupted twice, new revision runs at once", base: applied, mutate: func(in *decideInput) {
			in.Interrupted, in.Failures, in.LastAttemptFinished, in.Revision = true, 2, now, "main@sha1:n"
		}, want: ActionUp},
		{name: "requested with nothing changed still runs nothing", base: applied, mutate: func(in *decideInput) { in.Requested = true }, want: ActionNone},
		{name: "failed, retry not due: 3rd failure waits 4m", base: failed, want: ActionWait, after: 3 * time.Minute},
		{name: "failed, retry due", base: failed, mutate: func(in *decideInput) { in.LastAttemptFinished = now.Add(-5 * time.Minute) }, want: ActionUp},
		{name: "failed, new revision runs at once despite backoff", base: failed, mutate: func(in *decideInput) { in.Revision = "main@sha1:z" }, want: ActionUp},
		{name: "failed, spec change runs at once despite backoff", base: failed, mutate: func(in *decideInput) { in.InputsDigest = "sha256:9" }, want: ActionUp},
		{name: "failed, reconcile requested skips the backoff", base: failed, mutate: func(in *decideInput) { in.Requested = true }, want: ActionUp},
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
