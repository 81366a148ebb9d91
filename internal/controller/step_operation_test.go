package controller

import (
	"testing"

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
