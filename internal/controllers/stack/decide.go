package stack

import (
	"fmt"
	"strings"
	"time"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Action is what a reconcile does after resolving the source and the inputs;
// routes (route.go) maps each to the steps that do it.
type Action string

const (
	// ActionNone: the stack is up to date; no Pulumi process runs.
	ActionNone Action = "none"
	// ActionSkip: a new revision changed nothing under the program's paths;
	// no Pulumi process runs, and the revision is recorded as applied.
	ActionSkip Action = "skip"
	// ActionUp: run `pulumi up`.
	ActionUp Action = "up"
	// ActionWait: the last attempt at these very inputs failed and its retry is not due.
	ActionWait Action = "wait"
	// ActionRemediate: the failed attempt being retried was a remediate (a
	// drift repair at the applied program and inputs): remediate again, with
	// no check first (retryRemediate, step_remediate.go).
	ActionRemediate Action = "remediate"
	// ActionRollback: the up of a new change failed spec.rollback.afterFailures
	// times: apply the last applied program and inputs again (step_rollback.go).
	ActionRollback Action = "rollback"
	// ActionRolledBack: the change now resolved is the one a rollback took
	// back: it is not tried again until the program or the inputs differ
	// from it, or a person requests a reconcile.
	ActionRolledBack Action = "rolled-back"
)

// decideInput is everything decide looks at. It is a plain struct so that the
// rules are table-tested without a cluster.
type decideInput struct {
	Revision      string // resolved now
	ProgramDigest string // of spec.source.dir and spec.source.git.include at Revision
	InputsDigest  string // computed now

	LastAppliedRevision        string
	LastAppliedProgramDigest   string
	LastAppliedInputsDigest    string
	LastAttemptedProgramDigest string
	LastAttemptedInputsDigest  string
	Failures                   int64     // consecutive failed attempts of the last attempted program+inputs
	LastAttemptFinished        time.Time // when the last attempt ended

	Interrupted bool // an operation of ours was found unfinished (and counted in Failures)
	Requested   bool // a person asked for a reconcile now (annotation changed)
	// PolicyChanged: the failing attempt was stopped by a policy
	// (PolicyViolation, PolicyInvalid), and the policies that select the
	// Stack now are not those it ran with.
	PolicyChanged bool
	// LastAttemptRemediate: the newest finished attempt was a remediate.
	LastAttemptRemediate bool
	// RemediateOff: the newest finished attempt is a remediate that did not
	// succeed, and spec.driftDetection.mode is no longer Remediate.
	RemediateOff bool

	// RollbackAfter is spec.rollback's afterFailures, 0 when rollback is off.
	RollbackAfter int64
	// HasApplied: an up succeeded before (status.lastAppliedArtifact), so
	// there is something to roll back to.
	HasApplied bool
	// LastAttemptType and LastAttemptOutcome are those of the newest
	// finished attempt (drift checks and skips left out).
	LastAttemptType    v1alpha1.OperationType
	LastAttemptOutcome v1alpha1.OperationOutcome
	// RolledBack: status.rollback names the program and inputs resolved now
	// as the change it took back.
	RolledBack bool
	// InterruptedRollbacks counts the interrupted rollbacks at the top of
	// the history, in a row.
	InterruptedRollbacks int

	Now           time.Time
	RetryInterval time.Duration
	Interval      time.Duration
}

// decision is decide's answer; RequeueAfter is set for ActionWait.
type decision struct {
	Action       Action
	Why          string
	RequeueAfter time.Duration
}

// decide applies the rules of DESIGN.md: nothing changed runs nothing; a new
// program or new inputs always run at once, whatever the backoff; a failed
// attempt is retried after retryInterval, doubling up to a cap. An interrupted
// operation counts as a failed attempt: the first runs again at once, the
// second in a row waits out the backoff, so that a program that gets its
// runner killed (out of memory, say) does not loop.
//
// "The program" is its digest (spec.source.dir plus spec.source.git.include),
// not the revision: in a monorepo, a commit that touches another folder is a
// new revision with the same program, and runs nothing (ActionSkip, once; the
// revision is then the applied one). While an attempt is failing, such a
// commit changes nothing either: the retry keeps its backoff.
//
// A failed remediate is retried the same way, as a remediate: its program and
// inputs are the applied ones, so an up would change nothing, while the drift
// it failed to repair is still there.
func decide(in decideInput) decision {
	if d, ok := decideRollback(in); ok {
		return d
	}
	if d, ok := decideRemediateOff(in); ok {
		return d
	}
	d := decideApply(in)
	if d.Action == ActionUp && in.LastAttemptRemediate &&
		in.ProgramDigest == in.LastAppliedProgramDigest && in.InputsDigest == in.LastAppliedInputsDigest {
		d.Action = ActionRemediate
		d.Why = strings.Replace(d.Why, "operation", "remediate", 1)
	}
	return d
}

// decideRemediateOff stops a failing remediate once remediation is turned
// off: its program and inputs are the applied ones, so there is nothing to
// apply, and retrying it would go on forcing the program's values back
// (`up --refresh` with Server-Side Apply force) against the mode the spec
// now asks for. The drift stays reported (Drifted) by the checks of the mode
// now set.
func decideRemediateOff(in decideInput) (decision, bool) {
	if !in.RemediateOff || in.ProgramDigest != in.LastAppliedProgramDigest || in.InputsDigest != in.LastAppliedInputsDigest {
		return decision{}, false // a newer change runs as any change does
	}
	const why = "remediation is off (spec.driftDetection.mode is not Remediate): the failed remediate is not retried"
	if in.Revision != in.LastAppliedRevision {
		return decision{Action: ActionSkip, Why: why}, true
	}
	return decision{Action: ActionNone, Why: why}, true
}

// decideRollback applies spec.rollback: the up of a new change (a program or
// inputs that differ from the applied ones) that failed afterFailures times
// in a row is rolled back at once, whatever the backoff; the change rolled
// back is then held (not retried) until the program or the inputs differ
// from it, or a person requests a reconcile. A rollback is run once per
// failure of the change: a failed one is held too, so that it never loops.
// An interrupted rollback runs again once.
func decideRollback(in decideInput) (decision, bool) {
	if in.RollbackAfter == 0 {
		// Off (or turned off since): a held change is tried again like any
		// failed one.
		return decision{}, false
	}
	if in.LastAttemptType == v1alpha1.OperationRollback && in.RolledBack {
		switch {
		case in.LastAttemptOutcome == v1alpha1.OutcomeInterrupted && in.InterruptedRollbacks <= 1:
			return decision{Action: ActionRollback, Why: "the rollback was interrupted"}, true
		case in.Requested:
			return decision{}, false // a person asks to try the change again
		case in.PolicyChanged && in.LastAttemptOutcome == v1alpha1.OutcomeFailed:
			// A policy refused the rollback and has changed since: as a
			// person's request would, try the change again (and, failing,
			// roll it back under the policies as they are now).
			return decision{}, false
		case in.LastAttemptOutcome == v1alpha1.OutcomeSucceeded:
			return decision{Action: ActionRolledBack, Why: "the change was rolled back"}, true
		}
		return decision{Action: ActionRolledBack, Why: "the rollback of the change failed"}, true
	}
	newChange := in.ProgramDigest != in.LastAppliedProgramDigest || in.InputsDigest != in.LastAppliedInputsDigest
	stillWanted := in.ProgramDigest == in.LastAttemptedProgramDigest && in.InputsDigest == in.LastAttemptedInputsDigest
	if in.HasApplied && newChange && stillWanted &&
		in.LastAttemptType == v1alpha1.OperationUp && in.LastAttemptOutcome == v1alpha1.OutcomeFailed &&
		in.Failures >= in.RollbackAfter {
		return decision{Action: ActionRollback, Why: fmt.Sprintf("the up of %s failed %d time(s) in a row", in.Revision, in.Failures)}, true
	}
	return decision{}, false
}

func decideApply(in decideInput) decision {
	switch {
	case in.Interrupted && in.Failures <= 1:
		return decision{Action: ActionUp, Why: "the previous operation was interrupted"}
	case in.ProgramDigest != in.LastAttemptedProgramDigest || in.InputsDigest != in.LastAttemptedInputsDigest:
		if in.LastAttemptedProgramDigest == "" && in.LastAttemptedInputsDigest == "" {
			return decision{Action: ActionUp, Why: "first apply"}
		}
		if in.ProgramDigest != in.LastAttemptedProgramDigest {
			return decision{Action: ActionUp, Why: "the program changed in " + in.Revision}
		}
		return decision{Action: ActionUp, Why: "inputs changed"}
	case in.ProgramDigest == in.LastAppliedProgramDigest && in.InputsDigest == in.LastAppliedInputsDigest && in.Failures == 0:
		if in.Revision != in.LastAppliedRevision {
			return decision{Action: ActionSkip, Why: "no change to the program in " + in.Revision}
		}
		return decision{Action: ActionNone, Why: "up to date"}
	case in.Requested:
		return decision{Action: ActionUp, Why: "reconcile requested"}
	case in.PolicyChanged:
		// A platform team that fixes or relaxes a rule should not wait out
		// the backoff of every Stack the rule stopped.
		return decision{Action: ActionUp, Why: "the policies that stopped the operation changed"}
	}
	due := in.LastAttemptFinished.Add(backoff(in.Failures, in.RetryInterval, in.Interval))
	if !in.Now.Before(due) {
		return decision{Action: ActionUp, Why: "retrying the failed operation"}
	}
	why := "waiting to retry the failed operation"
	if in.Interrupted {
		why = "waiting to retry the interrupted operation"
	}
	return decision{Action: ActionWait, Why: why, RequeueAfter: due.Sub(in.Now)}
}

// backoff is retryInterval doubled per consecutive failure after the first,
// capped at the larger of interval and retryInterval.
func backoff(failures int64, retryInterval, interval time.Duration) time.Duration {
	if retryInterval <= 0 {
		retryInterval = time.Minute
	}
	limit := max(interval, retryInterval)
	d := retryInterval
	for i := int64(1); i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
