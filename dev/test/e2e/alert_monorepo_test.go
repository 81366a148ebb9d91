package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/notify"
)

// TestAlertMonorepoSkipSendsNothing: two Stacks on one repository, one
// Alert. A commit that touches only b/ applies b and skips a (its
// lastAppliedRevision moves, no up runs): the Alert says "applied" for b
// alone. A later commit that touches a/ applies a and is the next message
// about a; an Alert's messages go out in order, so a message for a's skip
// would have come before it.
func TestAlertMonorepoSkipSendsNothing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	repo := f.git.URL("mono")
	first := f.git.Commit(t, "mono", "main", monorepoTree("1", "1", "1"), "two stacks")
	sink := newAlertSink(t, false)
	f.start(t)
	logOnFailure(t, f)
	g.Expect(env.Client.Create(ctx, newAlert(f.ns, "team", v1alpha1.ProviderGeneric, sink.URL(), ""))).To(Succeed())

	newStack := func(name, dir string, include ...string) client.ObjectKey {
		s := f.stack(name, func(s *v1alpha1.Stack) {
			s.Spec.Source.Git.URL = repo
			s.Spec.Source.Git.Include = include
			s.Spec.Source.Dir = dir
			s.Spec.Outputs = nil
		})
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
		return client.ObjectKeyFromObject(s)
	}
	keyA := newStack("a", "a", "shared/")
	keyB := newStack("b", "b")
	waitApplied(t, keyA, first)
	waitApplied(t, keyB, first)

	onlyB := f.git.Commit(t, "mono", "main", monorepoTree("1", "2", "1"), "b only")
	requestReconcile(t, keyA)
	requestReconcile(t, keyB)
	waitApplied(t, keyB, onlyB)
	a := waitApplied(t, keyA, onlyB)
	g.Expect(a.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSkipped), "a skipped the commit")

	touchA := f.git.Commit(t, "mono", "main", monorepoTree("2", "2", "1"), "a")
	requestReconcile(t, keyA)
	waitApplied(t, keyA, touchA)

	type sent struct{ Event, Name, Revision string }
	var got []sent
	g.Eventually(func(g Gomega) {
		got = nil
		for _, r := range sink.Requests() {
			var ev notify.Event
			g.Expect(json.Unmarshal(r.Body, &ev)).To(Succeed())
			got = append(got, sent{string(ev.Type), ev.Name, ev.Revision})
		}
		g.Expect(got).To(ContainElement(sent{"applied", "a", "main@sha1:" + touchA}))
	}, 2*time.Minute, time.Second).Should(Succeed())
	g.Expect(got).To(ConsistOf(
		sent{"applied", "a", "main@sha1:" + first},
		sent{"applied", "b", "main@sha1:" + first},
		sent{"applied", "b", "main@sha1:" + onlyB},
		sent{"applied", "a", "main@sha1:" + touchA},
	), "no message for a's skip of %s", onlyB)
}
