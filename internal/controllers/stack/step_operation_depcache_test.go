package stack

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// What a Job operation's Pod found in the dependency cache lands in the
// operation's history record; any other word a Pod sends does not (the
// field's enum would refuse the whole status patch).
func TestFinishRecordDependencyCache(t *testing.T) {
	for cache, want := range map[string]string{runner.DepCacheHit: "hit", runner.DepCacheMiss: "miss", "": "", "Hit; rm -rf": ""} {
		g := NewWithT(t)
		stack := &v1alpha1.Stack{}
		rec := v1alpha1.OperationRecord{ID: "op-1", Type: v1alpha1.OperationUp, Outcome: v1alpha1.OutcomeRunning}
		stack.Status.History = []v1alpha1.OperationRecord{rec}
		st := &reconcileState{stack: stack, inputs: &inputs{}}
		res := &runner.Result{ID: "op-1", Outcome: runner.OutcomeSucceeded, FinishedAt: time.Now(), DependencyCache: cache}
		finishRecord(context.Background(), st, &rec, res)
		g.Expect(stack.Status.History).To(HaveLen(1))
		g.Expect(string(stack.Status.History[0].DependencyCache)).To(Equal(want))
	}
}
