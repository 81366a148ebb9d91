package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// checkDrift runs a drift check when one is due and nothing is to be
// applied (ActionNone, ActionSkip): a refresh preview of the last applied
// revision, which reports only what changed outside the program. It only
// checks: in Remediate mode, remediateDrift, next on the route, repairs what
// it found. An up that is due goes first (the check comes at a later
// reconcile), and a failed remediate is retried through decide's backoff
// (ActionRemediate), like any failure.
func (r *StackReconciler) checkDrift(ctx context.Context, st *reconcileState) (stepResult, error) {
	if err := r.driftIfDue(ctx, st); err != nil {
		return stepDone, err
	}
	return stepContinue, nil
}

// driftIfDue runs a check when its slot has come or a person asked for one
// (the reconcile-now annotation with a "drift-" value), else asks for a
// requeue at the slot. It never remediates: only the routes that go on to
// remediateDrift do, not those where an apply of a newer change is failing
// or waits for approval (the remediate waits for it).
func (r *StackReconciler) driftIfDue(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	mode := stack.GetDriftMode()
	manual := driftRequested(stack)
	if mode == v1alpha1.DriftDisabled && !manual {
		// No schedule; the report of the last (manual) check stays.
		if stack.Status.Drift != nil {
			stack.Status.Drift.NextCheckAt = nil
		}
		return nil
	}
	if stack.Status.LastAppliedArtifact == nil {
		return nil // nothing applied yet: nothing can have drifted
	}
	now := time.Now()
	next := r.scheduleDrift(ctx, stack, now, false)
	if !manual && (mode == v1alpha1.DriftDisabled || now.Before(next)) {
		if mode != v1alpha1.DriftDisabled {
			requeueBy(st, stack, next.Sub(now))
		}
		return nil
	}
	return r.runDrift(ctx, st)
}

// driftRequested is true when the unhandled reconcile-now value asks for a
// drift check.
func driftRequested(stack *v1alpha1.Stack) bool {
	v, ok := requestedAt(stack)
	return ok && v != stack.Status.LastHandledReconcileAt && strings.HasPrefix(v, v1alpha1.DriftCheckRequestPrefix)
}

// requeueBy makes the next reconcile come no later than d from now.
func requeueBy(st *reconcileState, stack *v1alpha1.Stack, d time.Duration) {
	d = max(d, time.Second)
	if d >= stack.GetRequeueAfter() {
		return
	}
	if st.requeueAfter == 0 || d < st.requeueAfter {
		st.requeueAfter = d
	}
}

// scheduleDrift returns status.drift.nextCheckAt, computing it when it is
// not set, or lies further ahead than the interval allows (the interval was
// shortened), or reschedule is set (a check just ended).
func (r *StackReconciler) scheduleDrift(ctx context.Context, stack *v1alpha1.Stack, now time.Time, reschedule bool) time.Time {
	interval := stack.GetDriftInterval()
	if stack.Status.Drift == nil {
		stack.Status.Drift = &v1alpha1.DriftStatus{}
	}
	d := stack.Status.Drift
	if !reschedule && d.NextCheckAt != nil && !d.NextCheckAt.After(now.Add(interval*3/2)) {
		return d.NextCheckAt.Time
	}
	ranked := r.driftRanks.among(interval, func() ([]string, bool) { return r.driftPeers(ctx, interval) })
	next := nextDriftCheck(now, phaseAmong(stackKey(stack), ranked, interval), interval)
	d.NextCheckAt = &metav1.Time{Time: next}
	return next
}

func stackKey(stack *v1alpha1.Stack) string { return stack.Namespace + "/" + stack.Name }

// driftPeers are the Stacks (from the cache) whose checks share interval;
// ok is false when they could not be listed.
func (r *StackReconciler) driftPeers(ctx context.Context, interval time.Duration) (keys []string, ok bool) {
	var list v1alpha1.StackList
	// Read only, so not copied: the cache's own objects, thousands of them.
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, false // the phase then comes from this Stack alone: still a valid slot
	}
	peers := make([]string, 0, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		if s.GetDriftMode() != v1alpha1.DriftDisabled && s.GetDriftInterval() == interval && !s.Spec.Suspend {
			peers = append(peers, stackKey(s))
		}
	}
	return peers, true
}

// runDrift checks the last applied revision and reports what it finds;
// what drifted is kept for remediateDrift (st.drift).
func (r *StackReconciler) runDrift(ctx context.Context, st *reconcileState) error {
	stack := st.stack
	revision := stack.Status.LastAppliedRevision
	art, err := r.appliedArtifact(ctx, stack)
	if err != nil {
		r.driftCheckFailed(ctx, st, fmt.Sprintf("the program of the last applied revision %s: %v", revision, err))
		return nil
	}
	failedBefore := conditions.GetReason(stack, v1alpha1.DriftedCondition) == v1alpha1.DriftCheckFailedReason
	res, err := r.runDriftCheck(ctx, st, art, revision)
	if err != nil {
		return err
	}
	if res.Outcome != runner.OutcomeSucceeded {
		r.driftCheckFailed(ctx, st, st.stack.Status.History[0].Message)
		if conditions.GetReason(stack, v1alpha1.DriftedCondition) == v1alpha1.DriftCheckFailedReason && failedBefore {
			// Only the first of a run of failed checks stays in the
			// history: a backend down for an hour must not push the ups out.
			stack.Status.History = stack.Status.History[1:]
		}
		return nil
	}
	f := filterDrift(res.Resources, stack.GetDriftIgnore())
	r.reportDrift(ctx, st, f)
	st.drift = &driftFound{program: art, filter: f}
	return nil
}

// driftFound is what a drift check of this reconcile found drifted, with
// the program it checked (the last applied revision's).
type driftFound struct {
	program artifact.Artifact
	filter  driftFilter
}

// runDriftCheck runs the refresh preview. Like every operation its start is
// in status first, so that a crash leaves a trace; unlike an up it leaves
// Ready, the failure count and the attempted revision alone: a check applies
// nothing.
func (r *StackReconciler) runDriftCheck(ctx context.Context, st *reconcileState, art artifact.Artifact, revision string) (*runner.Result, error) {
	if err := startAllowed(ctx); err != nil {
		return nil, err
	}
	stack := st.stack
	id := newOperationID(runner.OpDriftCheck)
	rec := v1alpha1.OperationRecord{
		ID:        id,
		Type:      v1alpha1.OperationDriftCheck,
		Revision:  revision,
		StartedAt: metav1.Now(),
		Outcome:   v1alpha1.OutcomeRunning,
		Host:      r.hostOf(stack, id),
	}
	stack.Status.CurrentOperation = rec.DeepCopy()
	stack.Status.PushHistory(rec)
	if err := st.patchStart(ctx, nil); err != nil {
		return nil, transient(v1alpha1.OperationFailedReason, fmt.Errorf("record the start of the drift check: %w", err))
	}
	r.inflight.start(stack.UID, rec.ID)
	defer func() { r.inflight.end(stack.UID, rec) }()

	res := r.execute(ctx, st, rec.ID, runner.OpDriftCheck, art, opOptions{})
	operationsTotal.WithLabelValues(string(runner.OpDriftCheck), string(res.Outcome)).Inc()
	operationSeconds.WithLabelValues(string(runner.OpDriftCheck)).Observe(res.FinishedAt.Sub(res.StartedAt).Seconds())
	finishRecord(ctx, st, &rec, res)
	return res, nil
}

// reportDrift writes what a check found into status.drift, the Drifted
// condition, the metrics and, when the drift state changed, an event and the
// history (a check that finds what the last one found is not kept there, so
// that hourly checks do not push the ups out of the history).
func (r *StackReconciler) reportDrift(ctx context.Context, st *reconcileState, f driftFilter) {
	stack := st.stack
	now := metav1.Now()
	prev := stack.Status.Drift
	wasDrifted := conditions.IsTrue(stack, v1alpha1.DriftedCondition)
	resources := boundDrift(f.Drifted)
	changed := conditions.Get(stack, v1alpha1.DriftedCondition) == nil ||
		wasDrifted != (len(resources) > 0) ||
		prev == nil || !sameDrift(prev.Resources, resources)
	if c := conditions.Get(stack, v1alpha1.DriftedCondition); c != nil && c.Status == metav1.ConditionUnknown {
		changed = true // after a failed check
	}

	stack.Status.Drift = &v1alpha1.DriftStatus{
		CheckedAt: &now,
		Revision:  stack.Status.LastAppliedRevision,
		Total:     int64(len(f.Drifted)),
		Resources: resources,
		Ignored:   boundDrift(f.IgnoredResources),
	}
	if stack.GetDriftMode() != v1alpha1.DriftDisabled {
		r.scheduleDrift(ctx, stack, now.Time, true)
	}

	rec := &stack.Status.History[0] // the check's own record (runDriftCheck)
	rec.Changes = driftChanges(f.Drifted)
	rec.Resources = driftURNs(f.Drifted)
	msg := driftMessage(stack.Status.Drift)
	rec.Message = truncate(msg, 2000)
	if !changed && !driftRequested(stack) {
		stack.Status.History = stack.Status.History[1:]
	}

	key := []string{stack.Namespace, stack.Name}
	if len(resources) > 0 {
		driftChecksTotal.WithLabelValues("drifted").Inc()
		stackDrifted.WithLabelValues(key...).Set(1)
		conditions.MarkTrue(stack, v1alpha1.DriftedCondition, v1alpha1.DriftDetectedReason, "%s", msg)
		if changed {
			r.event(stack, corev1.EventTypeWarning, v1alpha1.DriftDetectedReason, string(v1alpha1.OperationDriftCheck),
				fmt.Sprintf("drift detected at revision %s: %s", stack.Status.Drift.Revision, msg))
		}
		return
	}
	driftChecksTotal.WithLabelValues("clean").Inc()
	stackDrifted.WithLabelValues(key...).Set(0)
	conditions.MarkFalse(stack, v1alpha1.DriftedCondition, v1alpha1.NoDriftReason, "%s", msg)
	if wasDrifted {
		r.event(stack, corev1.EventTypeNormal, v1alpha1.NoDriftReason, string(v1alpha1.OperationDriftCheck),
			fmt.Sprintf("drift resolved: no drift at revision %s", stack.Status.Drift.Revision))
	}
}

// driftCheckFailed reports a check that could not run to the end: Drifted
// is Unknown (what was found before stays in status.drift), and the check
// is tried again after spec.retryInterval. Ready is about the last apply
// and stays as it is.
func (r *StackReconciler) driftCheckFailed(ctx context.Context, st *reconcileState, msg string) {
	stack := st.stack
	msg = scrubMsg(st, msg)
	driftChecksTotal.WithLabelValues("failed").Inc()
	already := conditions.GetReason(stack, v1alpha1.DriftedCondition) == v1alpha1.DriftCheckFailedReason
	conditions.MarkUnknown(stack, v1alpha1.DriftedCondition, v1alpha1.DriftCheckFailedReason, "drift check failed: %s", boundMessage(msg, maxConditionMessage))
	if !already {
		r.event(stack, corev1.EventTypeWarning, v1alpha1.DriftCheckFailedReason, string(v1alpha1.OperationDriftCheck), "drift check failed: "+msg)
	}
	if stack.Status.Drift == nil {
		stack.Status.Drift = &v1alpha1.DriftStatus{}
	}
	if stack.GetDriftMode() == v1alpha1.DriftDisabled {
		return // a manual check: no retry on a schedule
	}
	retry := min(stack.GetRetryInterval(), stack.GetDriftInterval())
	stack.Status.Drift.NextCheckAt = &metav1.Time{Time: time.Now().Add(retry)}
	requeueBy(st, stack, retry)
}

// checkDriftAfterUp runs the drift check a person asked for when an up went
// first in the same reconcile (it runs after a successful up only: route.go):
// the request is handled at the end of this reconcile, and must not be
// handled without its check. Like checkDrift it only checks.
func (r *StackReconciler) checkDriftAfterUp(ctx context.Context, st *reconcileState) (stepResult, error) {
	if !driftRequested(st.stack) {
		return stepContinue, nil
	}
	if err := r.runDrift(ctx, st); err != nil {
		return stepDone, err
	}
	return stepContinue, nil
}

func sameDrift(a, b []v1alpha1.DriftedResource) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].URN != b[i].URN || a[i].Op != b[i].Op || strings.Join(a[i].Properties, "\x00") != strings.Join(b[i].Properties, "\x00") {
			return false
		}
	}
	return true
}

func driftChanges(drifted []v1alpha1.DriftedResource) *v1alpha1.ChangeSummary {
	c := &v1alpha1.ChangeSummary{}
	for _, d := range drifted {
		switch d.Op {
		case "delete":
			c.Delete++
		case "create":
			c.Create++
		case "replace":
			c.Replace++
		default:
			c.Update++
		}
	}
	return c
}

// maxRecordResources bounds OperationRecord.resources.
const maxRecordResources = 20

func driftURNs(drifted []v1alpha1.DriftedResource) []string {
	var urns []string
	for _, d := range drifted[:min(len(drifted), maxRecordResources)] {
		urns = append(urns, cutUTF8(d.URN, 1024))
	}
	return urns
}

// driftMessage says what drifted: "2 resource(s) drifted: cfg (data.b),
// gone (deleted)", the first five named.
func driftMessage(d *v1alpha1.DriftStatus) string {
	if d == nil || d.Total == 0 {
		rev := ""
		if d != nil && d.Revision != "" {
			rev = " at revision " + d.Revision
		}
		return "no drift" + rev
	}
	return fmt.Sprintf("%d resource(s) drifted%s", d.Total, namesSuffix(d.Resources))
}

func namesSuffix(rs []v1alpha1.DriftedResource) string {
	if len(rs) == 0 {
		return ""
	}
	var parts []string
	for _, d := range rs[:min(len(rs), 5)] {
		what := ""
		switch {
		case d.Op == "delete":
			what = " (deleted)"
		case len(d.Properties) > 0:
			props := d.Properties[:min(len(d.Properties), 3)]
			what = " (" + strings.Join(props, ", ")
			if len(d.Properties) > 3 {
				what += fmt.Sprintf(", +%d", len(d.Properties)-3)
			}
			what += ")"
		}
		parts = append(parts, d.Name+what)
	}
	s := ": " + strings.Join(parts, ", ")
	if len(rs) > 5 {
		s += fmt.Sprintf(" and %d more", len(rs)-5)
	}
	return s
}
