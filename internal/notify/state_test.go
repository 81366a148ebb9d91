package notify

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// step is one observation of a Stack's status.
type step struct {
	ready       metav1.ConditionStatus
	reason      string
	applied     string
	program     string // status.lastAppliedProgramDigest
	drifted     metav1.ConditionStatus
	plan        string
	rollback    string
	policy      string // status.policy.operationID, with one finding of policyLevel
	policyLevel string
	running     bool // status.currentOperation set
	wantTypes   []v1alpha1.AlertEventType
}

func stackAt(s step) *v1alpha1.Stack {
	st := &v1alpha1.Stack{}
	st.Namespace, st.Name = "ns", "app"
	if s.ready != "" {
		st.Status.Conditions = append(st.Status.Conditions, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: s.ready, Reason: s.reason, Message: "line one\nline two"})
	}
	if s.drifted != "" {
		st.Status.Conditions = append(st.Status.Conditions, metav1.Condition{Type: v1alpha1.DriftedCondition, Status: s.drifted, Reason: "x"})
	}
	st.Status.LastAppliedRevision = s.applied
	st.Status.LastAppliedProgramDigest = s.program
	if s.plan != "" {
		st.Status.PendingPlan = &v1alpha1.PendingPlan{ID: s.plan}
		st.Status.Conditions = append(st.Status.Conditions, metav1.Condition{Type: v1alpha1.PlanPendingCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.AwaitingApprovalReason})
	}
	if s.rollback != "" {
		st.Status.Rollback = &v1alpha1.RollbackStatus{FailedRevision: s.rollback, At: metav1.NewTime(time.Unix(1000, 0))}
	}
	if s.running {
		st.Status.CurrentOperation = &v1alpha1.OperationRecord{ID: "op", Outcome: v1alpha1.OutcomeRunning}
	}
	if s.policy != "" {
		st.Status.Policy = &v1alpha1.StackPolicyStatus{OperationID: s.policy, Policies: []string{"StackPolicy/ns/p"}}
		if s.policyLevel != "" {
			st.Status.Policy.Violations = []v1alpha1.PolicyViolation{{Policy: "StackPolicy/ns/p/r", Enforcement: s.policyLevel,
				URN: "urn:pulumi:app::p::t::n", Message: "n breaks r"}}
		}
	}
	return st
}

const (
	T = metav1.ConditionTrue
	F = metav1.ConditionFalse
	U = metav1.ConditionUnknown
)

func typesOf(cs []Change) []v1alpha1.AlertEventType {
	var out []v1alpha1.AlertEventType
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

func runSteps(t *testing.T, seed step, steps []step) {
	t.Helper()
	state := Seed(stackAt(seed))
	for i, s := range steps {
		var cs []Change
		state, cs = Next(state, stackAt(s))
		got := typesOf(cs)
		if len(got) != len(s.wantTypes) {
			t.Fatalf("step %d: got %v, want %v", i, got, s.wantTypes)
		}
		for j := range got {
			if got[j] != s.wantTypes[j] {
				t.Fatalf("step %d: got %v, want %v", i, got, s.wantTypes)
			}
		}
	}
}

func TestTransitionsFailFailFailRecoverSendsTwo(t *testing.T) {
	runSteps(t, step{}, []step{
		{ready: U, reason: meta.ProgressingReason},
		{ready: T, reason: meta.SucceededReason, applied: "main@sha1:a", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventApplied}},
		{ready: U, reason: meta.ProgressingReason, applied: "main@sha1:a"},
		{ready: F, reason: v1alpha1.ProgramErrorReason, applied: "main@sha1:a", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventFailed}},
		{ready: F, reason: meta.ProgressingWithRetryReason, applied: "main@sha1:a"},
		{ready: F, reason: v1alpha1.ProgramErrorReason, applied: "main@sha1:a"},
		{ready: U, reason: meta.ProgressingReason, applied: "main@sha1:a"},
		{ready: F, reason: v1alpha1.OperationFailedReason, applied: "main@sha1:a"},
		{ready: T, reason: meta.SucceededReason, applied: "main@sha1:c", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventRecovered}},
		{ready: T, reason: meta.SucceededReason, applied: "main@sha1:c"},
	})
}

func TestTransitionsWaitingIsNoFailure(t *testing.T) {
	runSteps(t, step{ready: T, reason: meta.SucceededReason, applied: "a"}, []step{
		{ready: F, reason: v1alpha1.DependencyNotReadyReason, applied: "a"},
		{ready: F, reason: v1alpha1.AwaitingApprovalReason, applied: "a", plan: "p1", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventPlanPending}},
		{ready: F, reason: v1alpha1.AwaitingApprovalReason, applied: "a", plan: "p1"},
		{ready: T, reason: meta.SucceededReason, applied: "b", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventApplied}},
		{ready: T, reason: v1alpha1.SuspendedReason, applied: "b"},
	})
}

func TestTransitionsSeedSendsNothing(t *testing.T) {
	// A controller that starts on a failed, drifted Stack says nothing until it changes.
	runSteps(t, step{ready: F, reason: v1alpha1.ProgramErrorReason, applied: "a", drifted: T, plan: "p", rollback: "b"}, []step{
		{ready: F, reason: v1alpha1.ProgramErrorReason, applied: "a", drifted: T, plan: "p", rollback: "b"},
		{ready: T, reason: meta.SucceededReason, applied: "a", drifted: T, plan: "p", rollback: "b", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventRecovered}},
	})
}

func TestTransitionsDrift(t *testing.T) {
	runSteps(t, step{ready: T, applied: "a", drifted: F}, []step{
		{ready: T, applied: "a", drifted: T, wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventDrifted}},
		{ready: T, applied: "a", drifted: U},
		{ready: T, applied: "a", drifted: T},
		{ready: T, applied: "a", drifted: F, wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventDriftResolved}},
	})
}

func TestTransitionsRollback(t *testing.T) {
	runSteps(t, step{ready: T, applied: "a"}, []step{
		{ready: F, reason: v1alpha1.RolledBackReason, applied: "a", rollback: "b", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventRolledBack}},
		{ready: F, reason: v1alpha1.RolledBackReason, applied: "a", rollback: "b"},
		{ready: T, applied: "c", rollback: "b", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventRecovered}},
	})
}

// Each operation that finds violations is one policy-violation message;
// one that finds none, or the same operation seen again, sends none.
func TestTransitionsPolicyViolation(t *testing.T) {
	pv := v1alpha1.EventPolicyViolation
	runSteps(t, step{ready: T, applied: "a"}, []step{
		{ready: F, reason: v1alpha1.PolicyViolationReason, applied: "a", policy: "up-1", policyLevel: "mandatory",
			wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventFailed, pv}},
		{ready: F, reason: v1alpha1.PolicyViolationReason, applied: "a", policy: "up-1", policyLevel: "mandatory"},
		{ready: F, reason: v1alpha1.PolicyViolationReason, applied: "a", policy: "up-2", policyLevel: "mandatory", wantTypes: []v1alpha1.AlertEventType{pv}},
		{ready: T, applied: "b", policy: "up-3", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventRecovered}},
		{ready: T, applied: "c", policy: "up-4", policyLevel: "advisory", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventApplied, pv}},
	})
	ev := NewEvent(stackAt(step{ready: F, reason: v1alpha1.PolicyViolationReason, policy: "up-1", policyLevel: "mandatory"}), pv, time.Unix(0, 0))
	if ev.Severity != SeverityError || ev.Message != "StackPolicy/ns/p/r urn:pulumi:app::p::t::n: n breaks r" || ev.Total != 1 ||
		len(ev.Resources) != 1 || ev.Resources[0] != "mandatory StackPolicy/ns/p/r urn:pulumi:app::p::t::n" {
		t.Errorf("event %+v", ev)
	}
	if ev := NewEvent(stackAt(step{ready: T, policy: "up-4", policyLevel: "advisory"}), pv, time.Unix(0, 0)); ev.Severity != SeverityWarning {
		t.Errorf("advisory findings only: severity %q, want warning", ev.Severity)
	}
}

func TestChangeWanted(t *testing.T) {
	c := Change{Type: v1alpha1.EventRecovered, Also: []v1alpha1.AlertEventType{v1alpha1.EventApplied}}
	if got := c.Wanted(nil); got != v1alpha1.EventRecovered {
		t.Errorf("all events: %q", got)
	}
	if got := c.Wanted([]v1alpha1.AlertEventType{v1alpha1.EventApplied}); got != v1alpha1.EventApplied {
		t.Errorf("applied only: %q", got)
	}
	if got := c.Wanted([]v1alpha1.AlertEventType{v1alpha1.EventDrifted}); got != "" {
		t.Errorf("drifted only: %q", got)
	}
}

func TestRecoveredImpliesApplied(t *testing.T) {
	_, cs := Next(State{Failed: true, Applied: "a "}, stackAt(step{ready: T, applied: "b"}))
	if len(cs) != 1 || cs[0].Type != v1alpha1.EventRecovered || len(cs[0].Also) != 1 || cs[0].Also[0] != v1alpha1.EventApplied {
		t.Fatalf("got %+v", cs)
	}
}

func TestFirstLine(t *testing.T) {
	if got := FirstLine("\n  first \nsecond", 100); got != "first" {
		t.Errorf("%q", got)
	}
	if got := FirstLine("ééééé", 6); got != "é…" {
		t.Errorf("cut on a character boundary: %q", got)
	}
}

// The reconciler ends an operation in two patches: the conditions, then
// the record. The half-written status between them is not judged.
func TestTransitionsHalfWrittenStatus(t *testing.T) {
	runSteps(t, step{ready: F, reason: v1alpha1.ProgramErrorReason, applied: "a"}, []step{
		{ready: U, reason: meta.ProgressingReason, applied: "a", running: true},
		{ready: T, reason: meta.SucceededReason, applied: "a", running: true},
		{ready: T, reason: meta.SucceededReason, applied: "b", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventRecovered}},
		{ready: U, reason: meta.ProgressingReason, applied: "b", running: true},
		// The record first, Ready still Unknown: not yet.
		{ready: U, reason: meta.ProgressingReason, applied: "c"},
		{ready: T, reason: meta.SucceededReason, applied: "c", wantTypes: []v1alpha1.AlertEventType{v1alpha1.EventApplied}},
	})
}

// A controller that starts while an operation runs takes the Stack as it was.
func TestSeedMidOperation(t *testing.T) {
	runSteps(t, step{ready: U, reason: meta.ProgressingReason, applied: "a", running: true}, []step{
		{ready: T, reason: meta.SucceededReason, applied: "a"},
	})
}

// A monorepo commit elsewhere moves lastAppliedRevision, not the program:
// no "applied". A change to the program is one. A Stack whose digest gets
// recorded (adopted after an upgrade) sends nothing for that.
func TestTransitionsSkippedCommitIsNoApply(t *testing.T) {
	runSteps(t, step{ready: T, applied: "r1"}, []step{
		{ready: T, applied: "r1", program: "p1"},                                                  // digest adopted
		{ready: T, applied: "r2", program: "p1"},                                                  // skipped r2
		{ready: T, applied: "r3", program: "p1"},                                                  // skipped r3
		{ready: T, applied: "r4", program: "p2", wantTypes: []v1alpha1.AlertEventType{"applied"}}, // an up
		{ready: F, reason: "ProgramError", applied: "r4", program: "p2", wantTypes: []v1alpha1.AlertEventType{"failed"}},
		{ready: T, applied: "r5", program: "p2", wantTypes: []v1alpha1.AlertEventType{"recovered"}}, // skipped while failing: recovered, not applied
	})
}
