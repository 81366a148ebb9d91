package main

import (
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestLeaderElectionTimings(t *testing.T) {
	var o ctrl.Options
	if err := leaderTimings.apply(&o); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if *o.LeaseDuration != 12*time.Second || *o.RenewDeadline != 10*time.Second || *o.RetryPeriod != 2*time.Second {
		t.Fatalf("defaults %s/%s/%s, want 12s/10s/2s", *o.LeaseDuration, *o.RenewDeadline, *o.RetryPeriod)
	}
	for _, c := range []struct {
		t    leaderElectionTimings
		want string
	}{
		{leaderElectionTimings{lease: 10 * time.Second, renew: 10 * time.Second, retry: time.Second}, "renew-deadline (10s) must be shorter"},
		{leaderElectionTimings{lease: 15 * time.Second, renew: 2 * time.Second, retry: 2 * time.Second}, "more than 1.2 times"},
		{leaderElectionTimings{lease: 0, renew: time.Second, retry: time.Second}, "must be positive"},
	} {
		err := c.t.apply(&ctrl.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.t, err, c.want)
		}
	}
}
