package git

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/jitter"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// Stacks that requeue at a jittered interval (never earlier than it) and
// resolve with the interval as maxAge (the controller's sourceMaxAge): however
// many share the repository, it is listed at most once per interval, and
// no Stack is ever served, on a wake, the listing it was served on the wake
// before (a Stack alone on its repository checks it on every wake).
func TestJitteredWakesShareListings(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	srv.Commit(t, "app", "main", map[string]string{"Pulumi.yaml": "name: app"}, "1")
	const (
		interval  = 10 * time.Minute
		intervals = 20
		reconcile = 2 * time.Second // from the resolve to the requeue
	)
	j, err := jitter.New(10)
	if err != nil {
		t.Fatal(err)
	}
	j = j.WithSource(rand.New(rand.NewPCG(1, 2)).Int64N)
	maxAge := time.Duration(interval)

	for _, stacks := range []int{1, 100} {
		g := NewWithT(t)
		r, clock := newTestResolver()
		start := clock.Now()
		next := make([]time.Time, stacks)
		for k := range next {
			next[k] = start // all created at once
		}
		seen := make([]int64, stacks) // the listing each saw last (its request number)
		wakes := 0
		for {
			i := 0
			for k := range next {
				if next[k].Before(next[i]) {
					i = k
				}
			}
			if next[i].Sub(start) > intervals*interval {
				break
			}
			clock.Add(next[i].Sub(clock.Now()))
			_, err := r.Resolve(ctx, url, Ref{Branch: "main"}, nil, maxAge)
			g.Expect(err).NotTo(HaveOccurred())
			listing := r.Requests() // sequential: the cached listing is the newest request's
			g.Expect(listing).To(BeNumerically(">", seen[i]), "%d stacks: stack %d was served the listing it had at its previous wake", stacks, i)
			seen[i] = listing
			next[i] = clock.Now().Add(reconcile + j.Apply(interval))
			wakes++
		}
		// At most one request per interval, plus the first.
		limit := int64(intervals*interval/maxAge) + 1
		g.Expect(r.Requests()).To(BeNumerically("<=", limit), "%d stacks, %d wakes", stacks, wakes)
		t.Logf("%d stacks: %d wakes in %d intervals, %d ls-remote (limit %d)", stacks, wakes, intervals, r.Requests(), limit)
	}
}
