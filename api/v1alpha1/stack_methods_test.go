package v1alpha1

import (
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Flux condition helpers accept a *Stack.
var (
	_ conditions.Getter = &Stack{}
	_ conditions.Setter = &Stack{}
)

func TestDurationsFallBackToDefaults(t *testing.T) {
	g := NewWithT(t)

	var s Stack
	g.Expect(s.GetRequeueAfter()).To(Equal(DefaultInterval))
	g.Expect(s.GetRetryInterval()).To(Equal(DefaultRetryInterval))
	g.Expect(s.GetTimeout()).To(Equal(DefaultTimeout))

	s.Spec.Interval = metav1.Duration{Duration: 5 * time.Minute}
	s.Spec.RetryInterval = &metav1.Duration{Duration: 20 * time.Second}
	s.Spec.Timeout = &metav1.Duration{Duration: time.Hour}
	g.Expect(s.GetRequeueAfter()).To(Equal(5 * time.Minute))
	g.Expect(s.GetRetryInterval()).To(Equal(20 * time.Second))
	g.Expect(s.GetTimeout()).To(Equal(time.Hour))
}

func TestGetStackName(t *testing.T) {
	g := NewWithT(t)

	s := Stack{ObjectMeta: metav1.ObjectMeta{Name: "network"}}
	g.Expect(s.GetStackName()).To(Equal("network"))
	s.Spec.StackName = "acme/dev"
	g.Expect(s.GetStackName()).To(Equal("acme/dev"))
}

func TestSecretKeyRefGetKey(t *testing.T) {
	g := NewWithT(t)

	g.Expect((&SecretKeyRef{Name: "p"}).GetKey()).To(Equal(DefaultPassphraseKey))
	g.Expect((&SecretKeyRef{Name: "p", Key: "pw"}).GetKey()).To(Equal("pw"))
}

func TestConditionsRoundTrip(t *testing.T) {
	g := NewWithT(t)

	s := &Stack{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	conditions.MarkTrue(s, ReadyCondition, SucceededReason, "applied %s", "main@sha1:abc")
	g.Expect(conditions.IsReady(s)).To(BeTrue())
	g.Expect(s.Status.Conditions).To(HaveLen(1))
	g.Expect(conditions.GetObservedGeneration(s, ReadyCondition)).To(BeEquivalentTo(3))
}

func TestPushHistoryKeepsNewestFirstAndBounded(t *testing.T) {
	g := NewWithT(t)

	var st StackStatus
	for i := range MaxHistory + 3 {
		st.PushHistory(OperationRecord{ID: fmt.Sprint(i), Type: OperationUp, Outcome: OutcomeSucceeded})
		g.Expect(st.History).To(HaveLen(min(i+1, MaxHistory)))
		g.Expect(st.History[0].ID).To(Equal(fmt.Sprint(i)))
	}
	g.Expect(st.History[MaxHistory-1].ID).To(Equal("3"))
}

func TestPushHistoryDoesNotAliasOldSlice(t *testing.T) {
	g := NewWithT(t)

	old := []OperationRecord{{ID: "a"}, {ID: "b"}}
	st := StackStatus{History: old}
	st.PushHistory(OperationRecord{ID: "c"})
	g.Expect(old[0].ID).To(Equal("a"))
	g.Expect(st.History).To(HaveLen(3))
}
