package stack

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// A shard leaves an operation another shard started to that shard until it
// ends, or until it has outlived its timeout (that shard is gone); its own
// shard's operations (and an unsharded controller's, for an unsharded one)
// are recovered as before.
func TestAwaitOtherShard(t *testing.T) {
	g := NewWithT(t)
	sel, err := labels.Parse("sharding.fluxcd.io/key in (shard1)")
	g.Expect(err).NotTo(HaveOccurred())
	main, err := labels.Parse("!sharding.fluxcd.io/key")
	g.Expect(err).NotTo(HaveOccurred())
	stack := &v1alpha1.Stack{}
	op := func(shard string, age time.Duration) *v1alpha1.OperationRecord {
		return &v1alpha1.OperationRecord{ID: "up-1", Type: v1alpha1.OperationUp, Shard: shard,
			StartedAt: metav1.NewTime(time.Now().Add(-age))}
	}
	onMain := &StackReconciler{Config: Config{Shard: main}}
	unsharded := &StackReconciler{}

	g.Expect(onMain.awaitOtherShard(stack, op(main.String(), time.Minute))).To(Succeed(), "its own shard's")
	g.Expect(unsharded.awaitOtherShard(stack, op("", time.Minute))).To(Succeed(), "unsharded")

	err = onMain.awaitOtherShard(stack, op(sel.String(), time.Minute))
	var wait *WaitingError
	g.Expect(errors.As(err, &wait)).To(BeTrue(), "another shard's, running: %v", err)
	g.Expect(wait.Reason).To(Equal(v1alpha1.ShardHandoffReason))
	g.Expect(wait.Error()).To(ContainSubstring(`shard "sharding.fluxcd.io/key in (shard1)"`))

	g.Expect(onMain.awaitOtherShard(stack, op(sel.String(), stack.GetTimeout()+handoffGrace+time.Minute))).
		To(Succeed(), "another shard's that outlived its timeout: that shard is gone")
}
