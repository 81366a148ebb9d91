package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// scheduledCheck is what the spread test saw of one Stack's first scheduled check.
type scheduledCheck struct {
	name      string
	appliedAt time.Time // the first up's end
	startedAt time.Time // the check's history record, else status.drift.checkedAt
	fromCheck bool      // startedAt is checkedAt (no history record of the check)
	nextAt    time.Time // status.drift.nextCheckAt after it
}

// TestDriftChecksSpread: 20 Stacks created together, on one 20 s drift
// interval, are checked once each in the first 1.5 intervals after their
// apply, and the checks start spread over the interval, not in a burst.
//
// The schedule promises one slot per Stack, interval/count = 1 s apart, so
// the nextCheckAt of the 20 fall in 20 different seconds of the interval
// (mod 20 s). Stacks scheduled from their apply time instead would collide
// there: 20 random phases in 20 one-second slots are all different with
// probability 20!/20^20, about 2e-8.
//
// The real start times carry the controller's delays (a check waits for a
// free operation slot), so they are held to what chance allows: were the 20
// starts independent and uniform over the interval, a given second would get
// Binomial(20, 1/20) ≈ Poisson(1) of them, 4 or more with probability 1.9%
// (so some second of the 20 about a third of the time); a burst, as Stacks
// applied together and checked an interval later make, puts 4 or more in one
// second every time. The spread schedule gives each second one start, two
// when a check runs a second late: at most 3 in any second is the bound.
//
// Not parallel, unlike the other e2e tests: it is about when checks start,
// and four tests' Pulumi processes on two cores would delay them into
// bursts that are the machine's, not the schedule's. (Tests that are not
// parallel run one at a time before the parallel ones.)
func TestDriftChecksSpread(t *testing.T) {
	const stacks, interval = 20, 20 * time.Second
	g := NewWithT(t)
	ctx := context.Background()
	f := newDriftFixture(t, tinyProgram)
	// Enough operation slots that twenty 1-second checks in twenty seconds do
	// not queue behind each other: the test is about when they are due.
	f.start(t, "--concurrent-operations=4")
	logOnFailure(t, f)
	keys := make([]client.ObjectKey, stacks)
	for i := range keys {
		s := f.driftStack(fmt.Sprintf("spread-%02d", i), v1alpha1.DriftDetection{
			Mode:     v1alpha1.DriftDetect,
			Interval: &metav1.Duration{Duration: interval},
		}, func(s *v1alpha1.Stack) { delete(s.Spec.Config, "kubernetes:enableConfigMapMutable") })
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
		keys[i] = client.ObjectKeyFromObject(s)
	}
	start := time.Now()

	seen := map[string]scheduledCheck{}
	last := map[string]*v1alpha1.Stack{}
	defer func() {
		if t.Failed() {
			for _, key := range keys {
				if s := last[key.Name]; s != nil {
					t.Logf("%s: Ready %s; Drifted %s; drift %+v; history %+v", key.Name, readyMessage(s), driftedMessage(s), s.Status.Drift, s.Status.History)
				}
			}
		}
	}()
	g.Eventually(func(g Gomega) {
		for _, key := range keys {
			if _, ok := seen[key.Name]; ok {
				continue
			}
			s := getStack(g, key)
			last[key.Name] = s
			d := s.Status.Drift
			if d == nil || d.CheckedAt == nil {
				continue
			}
			ups := records(s, v1alpha1.OperationUp)
			g.Expect(ups).To(HaveLen(1), "%s: history %+v", key.Name, s.Status.History)
			g.Expect(ups[0].FinishedAt).NotTo(BeNil())
			c := scheduledCheck{name: key.Name, appliedAt: ups[0].FinishedAt.Time, startedAt: d.CheckedAt.Time, fromCheck: true}
			if checks := records(s, v1alpha1.OperationDriftCheck); len(checks) > 0 {
				g.Expect(checks).To(HaveLen(1), "%s: one check so far: %+v", key.Name, s.Status.History)
				c.startedAt, c.fromCheck = checks[0].StartedAt.Time, false
			}
			if d.NextCheckAt != nil {
				c.nextAt = d.NextCheckAt.Time
			}
			seen[key.Name] = c
		}
		g.Expect(seen).To(HaveLen(stacks), "Stacks checked so far")
	}, time.Minute+3*interval, 500*time.Millisecond).Should(Succeed())
	t.Logf("all %d Stacks checked %s after they were created", stacks, time.Since(start).Round(time.Second))

	checks := make([]scheduledCheck, 0, stacks)
	for _, c := range seen {
		checks = append(checks, c)
	}
	sort.Slice(checks, func(i, j int) bool { return checks[i].startedAt.Before(checks[j].startedAt) })
	perSecond := map[int64]int{}
	phases := map[int64][]string{}
	for _, c := range checks {
		source := "history"
		if c.fromCheck {
			source = "checkedAt"
		}
		phase := c.nextAt.Unix() % int64(interval/time.Second)
		t.Logf("%s: applied %s, check started %s (%s, +%s), next %s (phase %2ds)", c.name,
			c.appliedAt.Format("15:04:05"), c.startedAt.Format("15:04:05"), source,
			c.startedAt.Sub(c.appliedAt), c.nextAt.Format("15:04:05"), phase)
		perSecond[c.startedAt.Unix()]++
		phases[phase] = append(phases[phase], c.name)

		g.Expect(c.nextAt).NotTo(BeZero(), "%s: status.drift.nextCheckAt", c.name)
		// The first check is at least half an interval after the apply (1 s
		// for the seconds the times are rounded to), and at most one and a
		// half (plus 10 s for a check that waited for a free slot).
		g.Expect(c.startedAt).To(BeTemporally(">=", c.appliedAt.Add(interval/2-time.Second)), "%s: never right after the apply", c.name)
		g.Expect(c.startedAt).To(BeTemporally("<=", c.appliedAt.Add(3*interval/2+10*time.Second)), "%s: checked within 1.5 intervals", c.name)
	}
	busiest := 0
	for _, n := range perSecond {
		busiest = max(busiest, n)
	}
	t.Logf("starts per second at most %d; %d distinct phases of %d", busiest, len(phases), stacks)
	g.Expect(busiest).To(BeNumerically("<=", 3), "checks started in a burst: %v", perSecond)
	var shared []string
	for p, names := range phases {
		if len(names) > 1 {
			shared = append(shared, fmt.Sprintf("%ds: %s", p, strings.Join(names, ",")))
		}
	}
	g.Expect(shared).To(BeEmpty(), "each Stack has its own 1 s slot of the interval")
}
