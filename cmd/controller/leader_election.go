package main

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The Lease's timings under --leader-elect (high availability: two or more
// replicas, one leader). They live here, registered apart from parseFlags,
// so that the leader election wiring of main.go stays as it was.
//
// A standby takes over at most LeaseDuration plus RetryPeriod after the
// leader's last renewal when the leader dies without releasing the Lease
// (SIGKILL, OOM, a lost node); at once when the leader stops on SIGTERM
// (LeaderElectionReleaseOnCancel). A shorter Lease takes over sooner but
// renews more often (one write to the API server per RetryPeriod), and a
// leader that cannot renew within RenewDeadline (a loaded API server) stops.

// leaderTimings holds the flags below, parsed with the others.
//
// The lease is 12 s, not controller-runtime's 15 s: a standby notices the
// expiry only at its next try, and it counts from when it last saw the Lease
// change, which it reads once per retry period (each up to 1.2 times 2 s with
// client-go's jitter). With 15 s the measured takeover after a SIGKILL was
// 20.6 s, over the 20 s target; with 12 s it is about 3 s less
// (docs/measurements.md). The renew deadline and retry period are
// controller-runtime's: a leader that cannot renew for 10 s stops leading,
// 2 s before a standby may take over.
var leaderTimings = leaderElectionTimings{
	lease: 12 * time.Second,
	renew: 10 * time.Second,
	retry: 2 * time.Second,
}

type leaderElectionTimings struct{ lease, renew, retry time.Duration }

func init() {
	flag.DurationVar(&leaderTimings.lease, "leader-election-lease-duration", leaderTimings.lease,
		"With --leader-elect, how long a standby waits after the leader's last renewal of the Lease before it takes over; a leader that dies without releasing the Lease is replaced within this plus --leader-election-retry-period.")
	flag.DurationVar(&leaderTimings.renew, "leader-election-renew-deadline", leaderTimings.renew,
		"With --leader-elect, how long the leader keeps trying to renew the Lease before it gives up leading and exits; shorter than --leader-election-lease-duration.")
	flag.DurationVar(&leaderTimings.retry, "leader-election-retry-period", leaderTimings.retry,
		"With --leader-elect, how often the leader renews the Lease and a standby tries to take it.")
}

// newManager is ctrl.NewManager with the Lease's timings of the flags.
func newManager(cfg *rest.Config, o ctrl.Options) (ctrl.Manager, error) {
	if err := leaderTimings.apply(&o); err != nil {
		return nil, err
	}
	return ctrl.NewManager(cfg, o)
}

// leaderJitterFactor is client-go's leaderelection.JitterFactor: the renew
// deadline must exceed the retry period by this factor.
const leaderJitterFactor = 1.2

// apply checks the timings as client-go would (it refuses them only once the
// manager starts, less clearly) and sets them on the manager's options.
func (t leaderElectionTimings) apply(o *ctrl.Options) error {
	switch {
	case t.lease <= 0 || t.renew <= 0 || t.retry <= 0:
		return fmt.Errorf("--leader-election-lease-duration, --leader-election-renew-deadline and --leader-election-retry-period must be positive")
	case t.renew >= t.lease:
		return fmt.Errorf("--leader-election-renew-deadline (%s) must be shorter than --leader-election-lease-duration (%s)", t.renew, t.lease)
	case float64(t.renew) <= leaderJitterFactor*float64(t.retry):
		return fmt.Errorf("--leader-election-renew-deadline (%s) must be more than %.1f times --leader-election-retry-period (%s)", t.renew, leaderJitterFactor, t.retry)
	}
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr(t.lease), ptr(t.renew), ptr(t.retry)
	return nil
}
