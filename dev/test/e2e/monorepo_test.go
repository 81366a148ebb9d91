package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// folderProgram is a project that writes one ConfigMap, named after the
// project, whose data says which version of the folder made it.
func folderProgram(name, version string) string {
	return fmt.Sprintf(`name: %s
runtime: yaml
config:
  namespace:
    type: string
resources:
  cm:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: %s
        namespace: ${namespace}
      data:
        version: %q
outputs:
  version: ${cm.data.version}
`, name, name, version)
}

// monorepoTree is a repository with two Stack folders and a shared one.
func monorepoTree(a, b, shared string) map[string]string {
	return map[string]string{
		"a/Pulumi.yaml":   folderProgram("mono-a", a),
		"b/Pulumi.yaml":   folderProgram("mono-b", b),
		"shared/lib.yaml": "version: " + shared + "\n",
		"README.md":       "two stacks\n",
	}
}

// TestMonorepoCommitRunsOnlyTheStacksItTouches: Stack a (dir a/, include
// shared/) and Stack b (dir b/) follow one repository. A commit that touches
// only b/ runs b's up and starts no runner for a: a's status moves to the
// commit, Ready at it, and its history records the skip once, also after
// another reconcile at that commit, which fetches nothing. A commit that
// touches shared/ runs a's up, and b records its own skip.
func TestMonorepoCommitRunsOnlyTheStacksItTouches(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	repo := f.git.URL("mono")
	first := f.git.Commit(t, "mono", "main", monorepoTree("1", "1", "1"), "two stacks")
	f.start(t)

	newStack := func(name, dir string, include ...string) client.ObjectKey {
		s := f.stack(name, func(s *v1alpha1.Stack) {
			s.Spec.Source.Git.URL = repo
			s.Spec.Source.Git.Include = include
			s.Spec.Source.Dir = dir
		})
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
		return client.ObjectKeyFromObject(s)
	}
	keyA := newStack("a", "a", "shared/")
	keyB := newStack("b", "b")
	a := waitApplied(t, keyA, first)
	waitApplied(t, keyB, first)
	g.Expect(a.Status.LastAppliedProgramDigest).To(HavePrefix("sha256:"))
	g.Expect(a.Status.LastAttemptedProgramDigest).To(Equal(a.Status.LastAppliedProgramDigest))
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(2))
	firstUpA := a.Status.History[0]
	firstDigestA := a.Status.LastAppliedProgramDigest

	// A commit that touches only b/.
	onlyB := f.git.Commit(t, "mono", "main", monorepoTree("1", "2", "1"), "b only")
	requestReconcile(t, keyA)
	requestReconcile(t, keyB)
	waitApplied(t, keyB, onlyB)
	g.Expect(configMapData(g, f.ns, "mono-b")).To(HaveKeyWithValue("version", "2"))
	a = waitApplied(t, keyA, onlyB)
	g.Expect(a.Status.LastAppliedRevision).To(Equal("main@sha1:" + onlyB))
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(3), "b's up alone")
	g.Expect(f.ctrl.Operations(t, "")).To(Equal(3), "no runner process of any kind for a")
	g.Expect(a.Status.CurrentOperation).To(BeNil())
	g.Expect(a.Status.LastAttemptedRevision).To(Equal("main@sha1:"+first), "no operation was started at the new commit")
	assertOneSkip(g, a, onlyB, firstUpA)
	g.Expect(readyMessage(a)).To(ContainSubstring("no change under a/, shared/"))
	g.Expect(f.ctrl.Metric("stackpilot_ups_skipped_total")).To(BeNumerically("==", 1))
	events := stackEvents(t, f.ns, "a")
	g.Expect(hasLine(events, "UpSkipped: no change under a/, shared/ in main@sha1:"+onlyB)).To(BeTrue(), "events: %v", events)

	// Another reconcile at the same commit adds nothing and fetches nothing.
	fetches := f.git.PackFetches()
	a = waitHandled(t, keyA, requestReconcile(t, keyA))
	assertOneSkip(g, a, onlyB, firstUpA)
	g.Expect(readyMessage(a)).To(ContainSubstring("no change under a/, shared/"))
	g.Expect(f.git.PackFetches()).To(Equal(fetches), "no fetch without a new commit")
	g.Expect(f.ctrl.Operations(t, "")).To(Equal(3))
	g.Expect(configMapData(g, f.ns, "mono-a")).To(HaveKeyWithValue("version", "1"))

	// A commit that touches shared/ runs a's up; b skips it.
	sharedChange := f.git.Commit(t, "mono", "main", monorepoTree("1", "2", "2"), "shared")
	requestReconcile(t, keyA)
	requestReconcile(t, keyB)
	g.Eventually(func(g Gomega) {
		a := getStack(g, keyA)
		g.Expect(a.Status.History).NotTo(BeEmpty())
		g.Expect(a.Status.History[0].Revision).To(Equal("main@sha1:" + sharedChange))
		g.Expect(a.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded))
	}, 2*time.Minute, time.Second).Should(Succeed())
	a = waitApplied(t, keyA, sharedChange)
	g.Expect(a.Status.LastAttemptedRevision).To(Equal("main@sha1:" + sharedChange))
	g.Expect(a.Status.LastAppliedProgramDigest).NotTo(Equal(firstDigestA))
	b := waitApplied(t, keyB, sharedChange)
	g.Expect(b.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSkipped), "history: %+v", b.Status.History)
	g.Expect(b.Status.History[0].Message).To(ContainSubstring("no change under b/ in main@sha1:" + sharedChange))
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(4), "a's up alone")
	g.Expect(f.ctrl.Operations(t, "")).To(Equal(4))
}

// assertOneSkip: the newest history entry is the skip of revision, the one
// before it the first up, and nothing else.
func assertOneSkip(g Gomega, s *v1alpha1.Stack, revision string, firstUp v1alpha1.OperationRecord) {
	g.Expect(s.Status.History).To(HaveLen(2), "history: %+v", s.Status.History)
	skip := s.Status.History[0]
	g.Expect(skip.Outcome).To(Equal(v1alpha1.OutcomeSkipped))
	g.Expect(skip.Revision).To(Equal("main@sha1:" + revision))
	g.Expect(skip.Message).To(ContainSubstring("skipped: no change under a/, shared/ in main@sha1:" + revision))
	g.Expect(skip.FinishedAt).NotTo(BeNil())
	g.Expect(s.Status.History[1]).To(Equal(firstUp))
}
