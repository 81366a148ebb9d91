package stack

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestSummarizeStatus: each outcome of the steps to its conditions, requeue and
// observedGeneration. OutputsPublished belongs to the outputs steps and is
// never touched here.
func TestSummarizeStatus(t *testing.T) {
	const (
		interval = 10 * time.Minute
		retry    = 30 * time.Second
	)
	type want struct {
		kind        outcomeKind
		ready       metav1.ConditionStatus // "" = no Ready condition
		readyReason string
		reconciling bool
		stalled     bool
		requeue     time.Duration
		observed    bool // observedGeneration set to generation
	}
	missingDir := stallingAt("main@sha1:abc", v1alpha1.ArtifactFailedReason, "spec.source.dir %q in revision %s: not found", "app", "main@sha1:abc")
	cases := []struct {
		name     string
		err      error
		requeue  time.Duration // asked for by a step
		suspend  bool
		deleting bool
		noFinal  bool // the finalizer was removed
		want     want
	}{
		{name: "success", err: nil,
			want: want{kind: outcomeOK, ready: "True", readyReason: v1alpha1.SucceededReason, requeue: interval, observed: true}},
		{name: "success with a step's requeue", err: nil, requeue: 5 * time.Second,
			want: want{kind: outcomeOK, ready: "True", readyReason: v1alpha1.SucceededReason, requeue: 5 * time.Second, observed: true}},
		{name: "suspended", err: nil, suspend: true,
			want: want{kind: outcomeSuspended, ready: "True", readyReason: v1alpha1.SuspendedReason, observed: true}},
		{name: "stalling", err: stalling(v1alpha1.InvalidSpecReason, "spec.config: key %q is invalid", "a:b:c"),
			want: want{kind: outcomeStalled, ready: "False", readyReason: v1alpha1.InvalidSpecReason, stalled: true, observed: true}},
		{name: "stalling at a revision requeues at the interval", err: missingDir,
			want: want{kind: outcomeStalled, ready: "False", readyReason: v1alpha1.ArtifactFailedReason, stalled: true, requeue: interval, observed: true}},
		// A rolled-back change is Stalled at its revision, and its drift
		// checks (the applied revision's) keep their schedule.
		{name: "stalling at a revision with a step's sooner requeue", err: missingDir, requeue: 5 * time.Second,
			want: want{kind: outcomeStalled, ready: "False", readyReason: v1alpha1.ArtifactFailedReason, stalled: true, requeue: 5 * time.Second, observed: true}},
		{name: "wrapped stalling", err: fmt.Errorf("resolve: %w", stalling(v1alpha1.InvalidSpecReason, "bad")),
			want: want{kind: outcomeStalled, ready: "False", readyReason: v1alpha1.InvalidSpecReason, stalled: true, observed: true}},
		{name: "waiting with a delay", err: &WaitingError{Reason: v1alpha1.InputsNotFoundReason, Err: errors.New("Secret x not found"), RequeueAfter: 7 * time.Second},
			want: want{kind: outcomeWaiting, ready: "False", readyReason: v1alpha1.InputsNotFoundReason, reconciling: true, requeue: 7 * time.Second}},
		{name: "waiting without a delay retries at retryInterval", err: waiting(v1alpha1.InputsNotFoundReason, "Secret x not found"),
			want: want{kind: outcomeWaiting, ready: "False", readyReason: v1alpha1.InputsNotFoundReason, reconciling: true, requeue: retry}},
		{name: "transient with the step's backoff", err: transient(v1alpha1.ProgramErrorReason, errors.New("up failed")), requeue: 2 * time.Minute,
			want: want{kind: outcomeFailed, ready: "False", readyReason: v1alpha1.ProgramErrorReason, reconciling: true, requeue: 2 * time.Minute}},
		{name: "transient without a backoff retries at retryInterval", err: transient(v1alpha1.GitOperationFailedReason, errors.New("clone failed")),
			want: want{kind: outcomeFailed, ready: "False", readyReason: v1alpha1.GitOperationFailedReason, reconciling: true, requeue: retry}},
		{name: "outermost typed error decides", err: transient(v1alpha1.DestroyFailedReason, fmt.Errorf("destroy: %w", waiting(v1alpha1.InputsNotFoundReason, "gone"))),
			want: want{kind: outcomeFailed, ready: "False", readyReason: v1alpha1.DestroyFailedReason, reconciling: true, requeue: retry}},
		{name: "untyped error", err: errors.New("patch failed"),
			want: want{kind: outcomeFailed, ready: "False", readyReason: v1alpha1.OperationFailedReason, reconciling: true, requeue: retry}},
		{name: "publish failure", err: transient(v1alpha1.OutputsTooLargeReason, errors.New("too large")), requeue: 4 * time.Second,
			want: want{kind: outcomeFailed, ready: "False", readyReason: v1alpha1.OutputsTooLargeReason, reconciling: true, requeue: 4 * time.Second}},
		{name: "deleting, destroy failed", err: transient(v1alpha1.DestroyFailedReason, errors.New("destroy failed")), deleting: true,
			want: want{kind: outcomeFailed, ready: "False", readyReason: v1alpha1.DestroyFailedReason, reconciling: true, requeue: retry}},
		{name: "deleting and suspended still reports the destroy", err: transient(v1alpha1.DestroyFailedReason, errors.New("destroy failed")), deleting: true, suspend: true,
			want: want{kind: outcomeFailed, ready: "False", readyReason: v1alpha1.DestroyFailedReason, reconciling: true, requeue: retry}},
		{name: "finalized", err: nil, deleting: true, noFinal: true,
			want: want{kind: outcomeFinalized, ready: "True", readyReason: v1alpha1.SucceededReason, reconciling: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Generation: 3,
				Finalizers:  []string{v1alpha1.StackFinalizer},
				Annotations: map[string]string{v1alpha1.ReconcileRequestAnnotation: "now-1"}}}
			stack.Spec.Interval = metav1.Duration{Duration: interval}
			stack.Spec.RetryInterval = &metav1.Duration{Duration: retry}
			stack.Spec.Suspend = tc.suspend
			if tc.deleting {
				stack.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			if tc.noFinal {
				stack.Finalizers = nil
			}
			stack.Status.ObservedGeneration = 2
			// What the steps left: Ready from an earlier step, a leftover
			// Stalled, the operation's Reconciling, and a publish failure.
			if tc.err == nil {
				conditions.MarkTrue(stack, v1alpha1.ReadyCondition, v1alpha1.SucceededReason, "Applied")
			} else {
				conditions.MarkUnknown(stack, v1alpha1.ReadyCondition, v1alpha1.ProgressingReason, "Running up")
			}
			conditions.MarkStalled(stack, "Old", "old stall")
			conditions.MarkReconciling(stack, v1alpha1.ProgressingReason, "Running up")
			conditions.MarkFalse(stack, v1alpha1.OutputsPublishedCondition, v1alpha1.OutputsConflictReason, "controlled by Stack other")
			if tc.noFinal {
				conditions.Delete(stack, v1alpha1.StalledCondition)
			}
			before := conditions.Get(stack, v1alpha1.OutputsPublishedCondition).DeepCopy()

			s := summarizeStatus(stack, tc.err, tc.requeue, func(m string) string { return strings.ReplaceAll(m, "s3cret", "[redacted]") })

			g.Expect(s.kind).To(Equal(tc.want.kind))
			g.Expect(s.result.RequeueAfter).To(Equal(tc.want.requeue))
			ready := conditions.Get(stack, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tc.want.ready))
			g.Expect(ready.Reason).To(Equal(tc.want.readyReason))
			g.Expect(conditions.IsReconciling(stack)).To(Equal(tc.want.reconciling), "Reconciling")
			if tc.want.kind != outcomeFinalized {
				g.Expect(conditions.IsStalled(stack)).To(Equal(tc.want.stalled), "Stalled")
			}
			if tc.want.observed {
				g.Expect(stack.Status.ObservedGeneration).To(Equal(int64(3)))
			} else {
				g.Expect(stack.Status.ObservedGeneration).To(Equal(int64(2)))
			}
			g.Expect(conditions.Get(stack, v1alpha1.OutputsPublishedCondition)).To(Equal(before), "OutputsPublished untouched")
			if tc.want.kind != outcomeFinalized {
				g.Expect(stack.Status.LastHandledReconcileAt).To(Equal("now-1"))
			}
			if tc.err != nil && tc.want.kind != outcomeFinalized {
				g.Expect(s.reason).To(Equal(tc.want.readyReason))
				g.Expect(s.message).To(Equal(ready.Message))
			}
			if tc.want.kind == outcomeFailed {
				g.Expect(conditions.GetReason(stack, v1alpha1.ReconcilingCondition)).To(Equal(meta.ProgressingWithRetryReason))
			}
		})
	}
}

// TestSummarizeScrubsAndBounds: the condition message is scrubbed and bounded.
func TestSummarizeScrubsAndBounds(t *testing.T) {
	g := NewWithT(t)
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}
	long := "up failed: token s3cret " + strings.Repeat("é", 5000)
	s := summarizeStatus(stack, transient(v1alpha1.ProgramErrorReason, errors.New(long)), 0,
		func(m string) string { return strings.ReplaceAll(m, "s3cret", "[redacted]") })
	msg := conditions.GetMessage(stack, v1alpha1.ReadyCondition)
	g.Expect(msg).NotTo(ContainSubstring("s3cret"))
	g.Expect(msg).To(HavePrefix("up failed: token [redacted] é"))
	g.Expect(len(msg)).To(BeNumerically("<=", maxConditionMessage))
	g.Expect(strings.ToValidUTF8(msg, "?")).To(Equal(msg), "cut on a character boundary")
	g.Expect(s.message).To(Equal(msg))
}

// TestFindingsAsIfSetWhenFound: findings are written in the order they were
// found, each transition dated when it was found; until then readers see the
// newest through currentReady.
func TestFindingsAsIfSetWhenFound(t *testing.T) {
	g := NewWithT(t)
	stack := &v1alpha1.Stack{}
	conditions.MarkStalled(stack, v1alpha1.StackClaimedReason, "claimed")
	st := &reconcileState{stack: stack}
	st.found(finding{kind: foundInterrupted, progress: "Recovering", message: "up u-1 was interrupted"})
	g.Expect(st.currentReady().Reason).To(Equal(v1alpha1.InterruptedReason))
	g.Expect(conditions.Get(stack, v1alpha1.ReadyCondition)).To(BeNil(), "not written yet")
	st.found(finding{kind: foundApplied, message: "Applied revision main@sha1:a"})
	found := st.findings[1].at
	time.Sleep(1100 * time.Millisecond)
	st.writeFindings()

	g.Expect(st.findings).To(BeEmpty())
	ready := conditions.Get(stack, v1alpha1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(ready.Reason).To(Equal(v1alpha1.SucceededReason))
	g.Expect(ready.LastTransitionTime.Time).To(Equal(found.UTC().Truncate(time.Second)), "dated when found")
	g.Expect(conditions.GetReason(stack, v1alpha1.ReconcilingCondition)).To(Equal(v1alpha1.InterruptedReason), "the first finding's")
	g.Expect(conditions.Get(stack, v1alpha1.StalledCondition)).To(BeNil(), "as MarkReconciling does")
	g.Expect(st.currentReady().Reason).To(Equal(v1alpha1.SucceededReason))

	// Written again, the same: no new transition.
	st.found(finding{kind: foundApplied, message: "Applied revision main@sha1:a"})
	st.writeFindings()
	g.Expect(conditions.Get(stack, v1alpha1.ReadyCondition).LastTransitionTime.Time).To(Equal(found.UTC().Truncate(time.Second)))
}
