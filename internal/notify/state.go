// Package notify turns changes of a Stack's state into messages to the
// endpoints named by Alerts: transition detection (this file), the message
// (event.go), one payload builder per provider (provider_*.go) and an
// asynchronous, bounded, retried delivery per Alert (dispatch.go).
package notify

import (
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// State is what the notifier remembers of a Stack between two observations:
// only the facts whose change is worth a message. It lives in memory; on a
// start (or a leader change) it is seeded from the Stacks' current status,
// so a restart sends nothing for states that were already there.
type State struct {
	// Applied identifies what was last applied: revision and inputs digest.
	Applied string
	// Program identifies what the last up applied: the program's digest
	// and the inputs digest. A monorepo commit that changes nothing under a
	// Stack's paths moves its lastAppliedRevision (the up is skipped) and
	// leaves these: no operation applied anything, so no "applied". Empty
	// for a Stack applied before program digests were recorded; Applied
	// decides then.
	Program string
	// Failed is true from a failure until the Stack is Ready again. States
	// in between (progressing, retrying, waiting) keep it as it was, so
	// retries of one failure send one message.
	Failed bool
	// Drifted follows the Drifted condition (Unknown keeps it).
	Drifted bool
	// Plan is the id of the last pending plan seen.
	Plan string
	// Rollback identifies the last automatic rollback seen.
	Rollback string
	// Policy is the operation whose policy violations were last seen
	// (status.policy), empty when the last findings were none.
	Policy string
}

// notFailure lists the Ready=False reasons that are no failure: work under
// way, or a wait for something else (a person, a dependency).
var notFailure = map[string]bool{
	"":                                true,
	meta.ProgressingReason:            true,
	meta.ProgressingWithRetryReason:   true,
	meta.SucceededReason:              true,
	v1alpha1.SuspendedReason:          true,
	v1alpha1.AwaitingApprovalReason:   true,
	v1alpha1.PreviewOnlyReason:        true,
	v1alpha1.DependencyNotReadyReason: true,
}

// IsFailureReason says whether Ready=False with this reason is a failure.
func IsFailureReason(reason string) bool { return !notFailure[reason] }

// Seed is the state of a Stack seen for the first time: no message.
// A Stack in the middle of an operation is taken as it is: what it had
// applied, whether it was failing.
func Seed(stack *v1alpha1.Stack) State {
	return derive(State{}, stack)
}

// Next folds a new observation of the Stack into prev and returns the new
// state and the kinds of change between the two, at most one message per
// kind. A change that implies another carries it in Also (a recovery by a
// new apply is one "recovered" message, not two), so that an Alert that
// asks only for the implied kind still gets it.
func Next(prev State, stack *v1alpha1.Stack) (State, []Change) {
	if !Settled(stack) {
		return prev, nil
	}
	cur := derive(prev, stack)
	return cur, changes(prev, cur)
}

// derive folds the Stack's status into prev.
func derive(prev State, stack *v1alpha1.Stack) State {
	cur := prev
	st := &stack.Status
	if ready := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ReadyCondition); ready != nil {
		switch {
		case ready.Status == metav1.ConditionTrue && ready.Reason != v1alpha1.SuspendedReason:
			cur.Failed = false
		case ready.Status == metav1.ConditionFalse && IsFailureReason(ready.Reason):
			cur.Failed = true
		}
	}
	if st.LastAppliedRevision != "" {
		cur.Applied = st.LastAppliedRevision + " " + st.InputsDigest
	}
	if st.LastAppliedProgramDigest != "" {
		cur.Program = st.LastAppliedProgramDigest + " " + st.InputsDigest
	}
	if d := apimeta.FindStatusCondition(st.Conditions, v1alpha1.DriftedCondition); d != nil {
		switch d.Status {
		case metav1.ConditionTrue:
			cur.Drifted = true
		case metav1.ConditionFalse:
			cur.Drifted = false
		}
	}
	if p := st.PendingPlan; p != nil && apimeta.IsStatusConditionTrue(st.Conditions, v1alpha1.PlanPendingCondition) {
		cur.Plan = p.ID
	}
	if rb := st.Rollback; rb != nil {
		cur.Rollback = rb.At.UTC().Format("2006-01-02T15:04:05Z") + " " + rb.FailedRevision
	}
	cur.Policy = ""
	if p := st.Policy; p != nil && len(p.Violations) > 0 {
		cur.Policy = p.OperationID
	}
	return cur
}

// changes lists the kinds of change from prev to cur.
func changes(prev, cur State) []Change {

	var out []Change
	rolledBack := cur.Rollback != prev.Rollback && cur.Rollback != ""
	applied := appliedChanged(prev, cur)
	switch {
	case rolledBack && !prev.Failed && cur.Failed:
		out = append(out, Change{Type: v1alpha1.EventRolledBack, Also: []v1alpha1.AlertEventType{v1alpha1.EventFailed}})
	case rolledBack:
		out = append(out, Change{Type: v1alpha1.EventRolledBack})
	case !prev.Failed && cur.Failed:
		out = append(out, Change{Type: v1alpha1.EventFailed})
	}
	switch {
	case prev.Failed && !cur.Failed && applied:
		out = append(out, Change{Type: v1alpha1.EventRecovered, Also: []v1alpha1.AlertEventType{v1alpha1.EventApplied}})
	case prev.Failed && !cur.Failed:
		out = append(out, Change{Type: v1alpha1.EventRecovered})
	case applied && !rolledBack:
		// A rollback re-applies the old revision: that is the rolled-back message.
		out = append(out, Change{Type: v1alpha1.EventApplied})
	}
	switch {
	case !prev.Drifted && cur.Drifted:
		out = append(out, Change{Type: v1alpha1.EventDrifted})
	case prev.Drifted && !cur.Drifted:
		out = append(out, Change{Type: v1alpha1.EventDriftResolved})
	}
	if cur.Plan != prev.Plan && cur.Plan != "" {
		out = append(out, Change{Type: v1alpha1.EventPlanPending})
	}
	// Each operation that found violations is one message (its retries are
	// operations of their own: each says again what stops it).
	if cur.Policy != prev.Policy && cur.Policy != "" {
		out = append(out, Change{Type: v1alpha1.EventPolicyViolation})
	}
	return out
}

// appliedChanged says whether an operation applied something new between
// prev and cur. With the program digest on both sides it decides: a skipped
// commit moves the revision, not the program. Without it on either side (a
// Stack applied by an older controller, its digest recorded since), the
// revision and inputs do, so that recording the digest is no change.
func appliedChanged(prev, cur State) bool {
	if prev.Program != "" && cur.Program != "" {
		return cur.Program != prev.Program
	}
	return cur.Applied != prev.Applied && cur.Applied != ""
}

// Settled says whether the Stack's status can be judged: no operation under
// way, Ready not Unknown. The reconciler writes an operation's end in two
// patches (the conditions, then the rest of the status); in between, the
// conditions and the record disagree (Ready=True with the operation still
// running, or a new lastAppliedRevision beside an old Ready), and judging
// then would send "recovered" and then "applied" for one change.
func Settled(stack *v1alpha1.Stack) bool {
	if stack.Status.CurrentOperation != nil {
		return false
	}
	ready := apimeta.FindStatusCondition(stack.Status.Conditions, v1alpha1.ReadyCondition)
	return ready == nil || ready.Status != metav1.ConditionUnknown
}

// Change is one kind of change of a Stack's state.
type Change struct {
	Type v1alpha1.AlertEventType
	// Also are kinds this change implies.
	Also []v1alpha1.AlertEventType
}

// Wanted is the kind an Alert listening for events sees this change as,
// or "" when it listens for none of them. Empty events: all.
func (c Change) Wanted(events []v1alpha1.AlertEventType) v1alpha1.AlertEventType {
	if len(events) == 0 {
		return c.Type
	}
	for _, t := range append([]v1alpha1.AlertEventType{c.Type}, c.Also...) {
		for _, e := range events {
			if e == t {
				return t
			}
		}
	}
	return ""
}
