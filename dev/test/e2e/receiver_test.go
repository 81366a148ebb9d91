package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// A signed GitHub push reconciles the Stack that follows the pushed branch
// at once (its interval is an hour), and no other; a bad signature, a body
// too big and a replayed delivery are refused and reconcile nothing.
func TestReceiverGitHubPush(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.git.Commit(t, "infra", "dev", map[string]string{"app/Pulumi.yaml": bridgeProgram("")}, "dev")
	otherURL := f.git.URL("other")
	f.git.Commit(t, "other", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("")}, "other")
	f.start(t)
	hook := createReceiver(t, f.ns, f.ctrl, "github", v1alpha1.GitHubReceiver)

	app := f.stack("app")
	// Untouched Stacks need no program: they only must not be asked.
	devBranch := f.stack("dev-branch", func(s *v1alpha1.Stack) {
		s.Spec.Source.Git.Ref.Branch, s.Spec.Source.Dir = "dev", "not-here"
	})
	otherRepo := f.stack("other-repo", func(s *v1alpha1.Stack) {
		s.Spec.Source.Git.URL, s.Spec.Source.Dir = otherURL, "not-here"
	})
	for _, s := range []*v1alpha1.Stack{app, devBranch, otherRepo} {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	appKey := client.ObjectKeyFromObject(app)
	waitApplied(t, appKey, f.commit)
	for _, s := range []*v1alpha1.Stack{devBranch, otherRepo} {
		g.Eventually(func(g Gomega) {
			g.Expect(conditions.IsStalled(getStack(g, client.ObjectKeyFromObject(s)))).To(BeTrue())
		}, time.Minute, time.Second).Should(Succeed())
	}

	c2 := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: large")}, "second")
	push := githubPush(f.repoURL, "main", c2)
	notAsked := func(what string) {
		t.Helper()
		s := getStack(g, appKey)
		g.Expect(s.Annotations).NotTo(HaveKey(v1alpha1.ReconcileRequestAnnotation), what)
	}

	r := postGitHub(t, hook, push, "wrong-token", "d-bad")
	g.Expect(r.Code).To(Equal(401))
	r = postGitHub(t, hook, push, "", "d-unsigned")
	g.Expect(r.Code).To(Equal(401))
	notAsked("a bad signature asked for a reconcile")

	big := append(bytes.Repeat([]byte(" "), 1<<20), push...)
	r = postGitHub(t, hook, big, webhookToken, "d-big")
	g.Expect(r.Code).To(Equal(413))
	notAsked("a body over 1 MiB asked for a reconcile")

	began := time.Now()
	r = postGitHub(t, hook, push, webhookToken, "d-1")
	g.Expect(r).To(Equal(hookResult{Code: 200, Outcome: "accepted", Stacks: 1}))
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, appKey).Status.LastAppliedRevision).To(HaveSuffix(c2))
	}, time.Minute, 50*time.Millisecond).Should(Succeed())
	t.Logf("signed push -> commit %s applied in %s (interval 1h)", c2[:8], time.Since(began).Round(10*time.Millisecond))
	asked := getStack(g, appKey).Annotations[v1alpha1.ReconcileRequestAnnotation]
	g.Expect(asked).NotTo(BeEmpty())

	// The same delivery again: answered, not acted on.
	r = postGitHub(t, hook, push, webhookToken, "d-1")
	g.Expect(r).To(Equal(hookResult{Code: 200, Outcome: "replayed"}))
	g.Expect(getStack(g, appKey).Annotations[v1alpha1.ReconcileRequestAnnotation]).To(Equal(asked))

	for _, s := range []*v1alpha1.Stack{devBranch, otherRepo} {
		got := getStack(g, client.ObjectKeyFromObject(s))
		g.Expect(got.Annotations).NotTo(HaveKey(v1alpha1.ReconcileRequestAnnotation), "%s was asked to reconcile", s.Name)
	}

	for outcome, want := range map[string]int{"accepted": 1, "unauthorized": 2, "too_large": 1, "replayed": 1} {
		g.Expect(receiverEvents(t, f.ctrl, "github", outcome)).To(Equal(want), outcome)
	}
	var rcv v1alpha1.Receiver
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "github"}, &rcv)).To(Succeed())
		g.Expect(rcv.Status.LastEvent).NotTo(BeNil())
	}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(*rcv.Status.LastEvent).To(Equal(v1alpha1.ReceiverEvent{Event: "push", Repository: git.NormalizeURL(f.repoURL), Ref: "refs/heads/main", Stacks: 1}))
	g.Expect(f.ctrl.Logs(t)).NotTo(ContainSubstring(webhookToken))
}

// One push to a repository a hundred Stacks follow asks all of them, and
// they share one ls-remote.
func TestReceiverHundredStacksOneLsRemote(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	hook := createReceiver(t, f.ns, f.ctrl, "github", v1alpha1.GitHubReceiver)
	for i := range 100 {
		s := f.stack(fmt.Sprintf("fleet-%03d", i), func(s *v1alpha1.Stack) { s.Spec.Source.Dir = "not-here" })
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	settled := func(commit string, asked string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			var list v1alpha1.StackList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(100))
			for _, s := range list.Items {
				g.Expect(s.Status.LastHandledReconcileAt).To(Equal(asked), s.Name)
				g.Expect(conditions.IsStalled(&s)).To(BeTrue(), "%s: %s", s.Name, readyMessage(&s))
				g.Expect(readyMessage(&s)).To(ContainSubstring(commit), s.Name)
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
	}
	settled(f.commit, "")

	c2 := f.git.Commit(t, "infra", "main", map[string]string{"other": "x"}, "second")
	lsRemotes := func() int64 { return f.git.RefListings() - f.git.PackFetches() }
	before := lsRemotes()
	began := time.Now()
	r := postGitHub(t, hook, githubPush(f.repoURL, "main", c2), webhookToken, "fleet-1")
	g.Expect(r).To(Equal(hookResult{Code: 200, Outcome: "accepted", Stacks: 100}))
	var list v1alpha1.StackList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
	asked := list.Items[0].Annotations[v1alpha1.ReconcileRequestAnnotation]
	settled(c2, asked)
	n := lsRemotes() - before
	t.Logf("one push, 100 Stacks: %d ls-remote, all reconciled at %s in %s", n, c2[:8], time.Since(began).Round(10*time.Millisecond))
	g.Expect(n).To(Equal(int64(1)))
}
