package receiver

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The webhooks are served by every replica, not only the leader: a push
// reaches the Stacks through a failover (see docs/controller.md, High
// availability).
func TestListenerRunsOnEveryReplica(t *testing.T) {
	var r manager.Runnable = &Listener{}
	le, ok := r.(manager.LeaderElectionRunnable)
	if !ok || le.NeedLeaderElection() {
		t.Fatal("the webhook listener must not need leader election")
	}
}
