package stack

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// TestStatusOutputsBounded: whatever a program exports, status.outputs stays
// within its bounds, and what is left out says so.
func TestStatusOutputsBounded(t *testing.T) {
	g := NewWithT(t)
	target := &v1alpha1.OutputsTarget{SecretName: "app-outputs"}
	outputs := map[string]runner.Output{
		"small":  {Value: "vpc-0abc"},
		"number": {Value: 3.0},
		"token":  {Value: "s3cr3t-value", Secret: true},
		"big":    {Value: strings.Repeat("x", 3*1024*1024)},
	}
	// 20 values of 1000 bytes: 16 fit in the 16 KiB budget with the others.
	for i := range 20 {
		outputs[fmt.Sprintf("mid%02d", i)] = runner.Output{Value: strings.Repeat("m", 998)}
	}
	got, omitted := statusOutputs(outputs, target)
	g.Expect(omitted).To(BeZero())
	g.Expect(got).To(HaveLen(len(outputs)))
	g.Expect(got).To(HaveKeyWithValue("small", `"vpc-0abc"`))
	g.Expect(got).To(HaveKeyWithValue("number", `3`))
	g.Expect(got).To(HaveKeyWithValue("token", v1alpha1.SecretOutputValue))
	g.Expect(got).To(HaveKeyWithValue("big", "[omitted: 3 MiB; see Secret app-outputs]"))
	total, notes := 0, 0
	for k, v := range got {
		g.Expect(len(v)).To(BeNumerically("<=", v1alpha1.MaxStatusOutputValue), k)
		if strings.HasPrefix(v, v1alpha1.OmittedOutputPrefix) {
			notes++
			continue
		}
		total += len(v)
	}
	g.Expect(total).To(BeNumerically("<=", v1alpha1.MaxStatusOutputsBytes))
	g.Expect(total).To(BeNumerically(">", v1alpha1.MaxStatusOutputsBytes-1024), "the budget is used")
	g.Expect(notes).To(Equal(1 + 4)) // big, and the 1000-byte values past the budget

	// A value at the bound is shown; one byte more is not.
	edge, _ := statusOutputs(map[string]runner.Output{
		"edge": {Value: strings.Repeat("y", v1alpha1.MaxStatusOutputValue-2)}, // 1024 with its quotes
		"over": {Value: strings.Repeat("y", v1alpha1.MaxStatusOutputValue-1)},
	}, target)
	g.Expect(edge["edge"]).To(HaveLen(v1alpha1.MaxStatusOutputValue))
	g.Expect(edge["over"]).To(Equal("[omitted: 1 KiB; see Secret app-outputs]"))

	// Past MaxStatusOutputs outputs, the rest are counted, by name order.
	many := map[string]runner.Output{}
	for i := range v1alpha1.MaxStatusOutputs + 7 {
		many[fmt.Sprintf("k%03d", i)] = runner.Output{Value: i}
	}
	got, omitted = statusOutputs(many, nil)
	g.Expect(got).To(HaveLen(v1alpha1.MaxStatusOutputs))
	g.Expect(omitted).To(Equal(int64(7)))
	g.Expect(got).To(HaveKey("k000"))
	g.Expect(got).NotTo(HaveKey(fmt.Sprintf("k%03d", v1alpha1.MaxStatusOutputs)))

	// The whole of status.outputs stays small: well under etcd's object limit.
	raw, err := json.Marshal(got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(raw)).To(BeNumerically("<", 64*1024))
}

// TestFitsInObject: over 1 MiB of data is refused before anything is written,
// naming the largest outputs and their sizes, never a value.
func TestFitsInObject(t *testing.T) {
	g := NewWithT(t)
	g.Expect(fitsInObject("Secret", "out", map[string]string{"a": strings.Repeat("v", maxObjectData-1)})).To(Succeed())
	secret := "s3cr3t-" + strings.Repeat("z", 1200*1024)
	err := fitsInObject("Secret", "out", map[string]string{"blob": secret, "name": "n"})
	g.Expect(err).To(HaveOccurred())
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.OutputsTooLargeReason))
	g.Expect(err.Error()).To(ContainSubstring("Secret out: 1.2 MiB of data, over the 1 MiB a Secret can hold (largest: blob (1.2 MiB), name (5 B))"))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
}

func TestHumanSize(t *testing.T) {
	g := NewWithT(t)
	g.Expect(humanSize(512)).To(Equal("512 B"))
	g.Expect(humanSize(1536)).To(Equal("1.5 KiB"))
	g.Expect(humanSize(1024 * 1024)).To(Equal("1 MiB"))
	g.Expect(humanSize(2411724)).To(Equal("2.3 MiB"))
}

// TestEventNoteWithinLimit: a note over the API server's 1 KiB limit (which
// would drop the event) keeps its first line and points to the status.
func TestEventNoteWithinLimit(t *testing.T) {
	g := NewWithT(t)
	rec := record.NewFakeRecorder(10)
	r := &StackReconciler{EventRecorder: rec}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}

	diag := "up up-1 of revision main@sha1:abc failed: error: resource settings: undefined variable doesNotExist\n" +
		strings.Repeat("  error: another diagnostic line\n", 100)
	r.event(stack, "Warning", v1alpha1.ProgramErrorReason, "up", diag)
	got := <-rec.Events
	// The fake recorder appends the annotations: " map[k:v ...]".
	note := got[strings.Index(got, "up up-1"):strings.LastIndex(got, " map[")]
	g.Expect(len(note)).To(BeNumerically("<=", maxEventNote))
	g.Expect(note).To(Equal("up up-1 of revision main@sha1:abc failed: error: resource settings: undefined variable doesNotExist (see the Stack's status for the rest)"))

	oneLine := strings.Repeat("é", 2000)
	g.Expect(len(eventNote(oneLine))).To(BeNumerically("<=", maxEventNote))
	g.Expect(strings.ToValidUTF8(eventNote(oneLine), "?")).To(Equal(eventNote(oneLine)))
	short := "up ok\nwith two lines"
	g.Expect(eventNote(short)).To(Equal(short), "a short note is left alone")
}

// TestEventsCarryTheRevision: events are annotated with the revision they
// are about, under the API group, as Flux's controllers annotate theirs.
func TestEventsCarryTheRevision(t *testing.T) {
	g := NewWithT(t)
	rec := record.NewFakeRecorder(10)
	r := &StackReconciler{EventRecorder: rec}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}
	stack.Status.LastAppliedRevision = "main@sha1:old"
	stack.Status.History = []v1alpha1.OperationRecord{{ID: "up-2", Revision: "main@sha1:new"}}
	r.event(stack, "Normal", "UpSucceeded", "up", "applied")
	g.Expect(<-rec.Events).To(HaveSuffix("map[stackpilot.dev/operation:up stackpilot.dev/revision:main@sha1:new]"))

	stack.Status.History = nil
	r.event(stack, "Normal", "UpSkipped", "up", "skipped")
	g.Expect(<-rec.Events).To(ContainSubstring("stackpilot.dev/revision:main@sha1:old"))
}

// TestPublishRetryWait: a failed publish backs off on its own counter.
func TestPublishRetryWait(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	stack := &v1alpha1.Stack{}
	stack.Spec.Interval = metav1.Duration{Duration: time.Hour}
	stack.Spec.RetryInterval = &metav1.Duration{Duration: 10 * time.Second}
	g.Expect(publishRetryWait(stack, now)).To(BeZero())
	stack.Status.LastOutputsPublishAttempt = &metav1.Time{Time: now.Add(-3 * time.Second)}
	stack.Status.OutputsPublishFailures = 1
	g.Expect(publishRetryWait(stack, now)).To(Equal(7 * time.Second))
	stack.Status.OutputsPublishFailures = 3
	g.Expect(publishRetryWait(stack, now)).To(Equal(37 * time.Second))
	conditions.MarkFalse(stack, v1alpha1.OutputsPublishedCondition, v1alpha1.OutputsConflictReason, "taken")
	g.Expect(publishRetryWait(stack, now)).To(Equal(37 * time.Second))
	stack.Generation++ // the spec changed since: retry at once
	g.Expect(publishRetryWait(stack, now)).To(BeZero())
	stack.Generation--
	stack.Status.LastOutputsPublishAttempt = &metav1.Time{Time: now.Add(-time.Hour)}
	g.Expect(publishRetryWait(stack, now)).To(BeZero())
}

// TestPublishFailedKeepsTheUp: a failed publish counts on its own, never
// touches what decides an up, and says why in OutputsPublished.
func TestPublishFailedKeepsTheUp(t *testing.T) {
	g := NewWithT(t)
	r := &StackReconciler{EventRecorder: record.NewFakeRecorder(10)}
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}
	stack.Spec.RetryInterval = &metav1.Duration{Duration: 2 * time.Second}
	stack.Spec.Outputs = &v1alpha1.OutputsTarget{SecretName: "out"}
	stack.Status.LastAttemptedInputsDigest = "sha256:in"
	stack.Status.LastAttemptedRevision = "main@sha1:abc"
	stack.Status.LastAppliedRevision = "main@sha1:abc"
	stack.Status.InputsDigest = "sha256:in"
	stack.Status.LastAttemptedProgramDigest = "sha256:p"
	stack.Status.LastAppliedProgramDigest = "sha256:p"
	st := &reconcileState{stack: stack}
	for i := 1; i <= 3; i++ {
		err := r.publishFailed(st, fitsInObject("Secret", "out", map[string]string{"big": strings.Repeat("x", 2<<20)}))
		g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.OutputsTooLargeReason))
		g.Expect(stack.Status.OutputsPublishFailures).To(Equal(int64(i)))
		g.Expect(st.requeueAfter).To(Equal(backoff(int64(i), 2*time.Second, v1alpha1.DefaultInterval)))
	}
	g.Expect(stack.Status.LastAttemptedInputsDigest).To(Equal("sha256:in"), "the next reconcile must not see new inputs")
	next := decide(decideInput{
		Revision: "main@sha1:abc", ProgramDigest: "sha256:p", InputsDigest: "sha256:in",
		LastAppliedRevision: stack.Status.LastAppliedRevision, LastAppliedProgramDigest: stack.Status.LastAppliedProgramDigest,
		LastAppliedInputsDigest:    stack.Status.InputsDigest,
		LastAttemptedProgramDigest: stack.Status.LastAttemptedProgramDigest, LastAttemptedInputsDigest: stack.Status.LastAttemptedInputsDigest,
		Failures: stack.Status.Failures, Now: time.Now(), RetryInterval: 2 * time.Second, Interval: time.Hour,
	})
	g.Expect(next.Action).To(Equal(ActionNone), "no up after a failed publish: %s", next.Why)
	g.Expect(stack.Status.LastAppliedRevision).To(Equal("main@sha1:abc"))
	g.Expect(stack.Status.Failures).To(BeZero(), "the up's failure count is not the publish's")
	c := conditions.Get(stack, v1alpha1.OutputsPublishedCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(v1alpha1.OutputsTooLargeReason))
	g.Expect(c.Message).To(ContainSubstring("big (2 MiB)"))

	markOutputsPublished(stack)
	g.Expect(conditions.IsTrue(stack, v1alpha1.OutputsPublishedCondition)).To(BeTrue())
	g.Expect(stack.Status.OutputsPublishFailures).To(BeZero())
	g.Expect(stack.Status.LastOutputsPublishAttempt).To(BeNil())
}

func TestSameKeys(t *testing.T) {
	g := NewWithT(t)
	g.Expect(sameKeys([]string{"a", "b"}, []string{"a", "b"}, 0, 0)).To(BeTrue())
	g.Expect(sameKeys([]string{"a", "b", "c"}, []string{"a", "b"}, 0, 0)).To(BeFalse())
	g.Expect(sameKeys([]string{"a", "b", "c"}, []string{"a", "b"}, 1, 1)).To(BeTrue())
	g.Expect(sameKeys([]string{"a", "c", "d"}, []string{"a", "b"}, 1, 1)).To(BeFalse())
	g.Expect(sameKeys([]string{"a", "b"}, []string{"a", "b"}, 0, 2)).To(BeTrue())
	g.Expect(sameKeys([]string{"a", "b"}, []string{"a", "b"}, 1, 2)).To(BeFalse())
}
