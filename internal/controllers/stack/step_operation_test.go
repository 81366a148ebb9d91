package stack

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestLockMayBeStale(t *testing.T) {
	finished := metav1.Now()
	rec := func(outcome v1alpha1.OperationOutcome, reason, message string) v1alpha1.OperationRecord {
		return v1alpha1.OperationRecord{Outcome: outcome, Reason: reason, Message: message, FinishedAt: &finished}
	}
	running := v1alpha1.OperationRecord{Outcome: v1alpha1.OutcomeRunning}
	for _, tc := range []struct {
		name    string
		history []v1alpha1.OperationRecord
		want    bool
	}{
		{"no history", nil, false},
		{"last succeeded", []v1alpha1.OperationRecord{rec(v1alpha1.OutcomeSucceeded, "", "")}, false},
		{"last interrupted", []v1alpha1.OperationRecord{rec(v1alpha1.OutcomeInterrupted, v1alpha1.InterruptedReason, "")}, true},
		{"last timed out", []v1alpha1.OperationRecord{rec(v1alpha1.OutcomeCancelled, v1alpha1.TimeoutReason, "")}, true},
		{"last failed in the program", []v1alpha1.OperationRecord{rec(v1alpha1.OutcomeFailed, v1alpha1.ProgramErrorReason, "")}, false},
		// The class decides, not the words: a program's own message may say "timed out".
		{"program error saying timed out", []v1alpha1.OperationRecord{rec(v1alpha1.OutcomeFailed, v1alpha1.ProgramErrorReason, "http request timed out")}, false},
		{"the one starting now is skipped", []v1alpha1.OperationRecord{running, rec(v1alpha1.OutcomeInterrupted, v1alpha1.InterruptedReason, "")}, true},
		{"one that found the lock kept it for the one before", []v1alpha1.OperationRecord{running, rec(v1alpha1.OutcomeConflict, v1alpha1.LockedReason, ""), rec(v1alpha1.OutcomeInterrupted, v1alpha1.InterruptedReason, "")}, true},
		{"only the newest finished one counts", []v1alpha1.OperationRecord{rec(v1alpha1.OutcomeSucceeded, "", ""), rec(v1alpha1.OutcomeInterrupted, v1alpha1.InterruptedReason, "")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1alpha1.Stack{Status: v1alpha1.StackStatus{History: tc.history}}
			NewWithT(t).Expect(lockMayBeStale(s)).To(Equal(tc.want))
		})
	}
}

// TestStaleLockSince: interrupted again before it cleared the first one's
// lock, the second operation's successor may clear both: the run of dead
// operations of one host counts, back to the last one that ended normally.
func TestStaleLockSince(t *testing.T) {
	g := NewWithT(t)
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 1, 8, min, 0, 0, time.UTC)) }
	rec := func(min int, outcome v1alpha1.OperationOutcome, reason, host string) v1alpha1.OperationRecord {
		done := at(min + 1)
		return v1alpha1.OperationRecord{StartedAt: at(min), FinishedAt: &done, Outcome: outcome, Reason: reason, Host: host}
	}
	stack := &v1alpha1.Stack{Status: v1alpha1.StackStatus{History: []v1alpha1.OperationRecord{
		{Outcome: v1alpha1.OutcomeRunning, StartedAt: at(30)},
		rec(20, v1alpha1.OutcomeInterrupted, v1alpha1.InterruptedReason, "a"),
		rec(15, v1alpha1.OutcomeConflict, v1alpha1.LockedReason, "a"),
		rec(10, v1alpha1.OutcomeInterrupted, v1alpha1.InterruptedReason, "a"),
		rec(5, v1alpha1.OutcomeSucceeded, "", "a"),
		rec(1, v1alpha1.OutcomeInterrupted, v1alpha1.InterruptedReason, "a"),
	}}}
	owner := staleLockOwner(stack)
	g.Expect(owner.StartedAt).To(Equal(at(20)))
	g.Expect(staleLockSince(stack, owner)).To(Equal(at(10)), "back to the first of the run, not past the success")

	stack.Status.History[3].Host = "b" // another host's: the run stops there
	g.Expect(staleLockSince(stack, owner)).To(Equal(at(20)))
}

// TestTruncateKeepsCharactersWhole: a message cut for status stays valid UTF-8.
func TestTruncateKeepsCharactersWhole(t *testing.T) {
	g := NewWithT(t)
	s := strings.Repeat("é", 10) // 2 bytes each
	cut := truncate(s, 5)
	g.Expect(utf8.ValidString(cut)).To(BeTrue(), "%q", cut)
	g.Expect(cut).To(Equal("éé…"))
	g.Expect(truncate("  short  ", 5)).To(Equal("short"))
}
