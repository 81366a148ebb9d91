package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestGitRepositoryOverTheBounds (issue 21, item 3): a Git repository whose
// objects exceed --artifact-max-size, and one with more files than
// --artifact-max-files, stall their Stacks with a message naming the bound
// and the flag; nothing of either program runs. An ordinary repository on
// the same controller is applied as usual.
func TestGitRepositoryOverTheBounds(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	blob := make([]byte, 1<<20)
	_, err := rand.Read(blob) // incompressible: the pack cannot shrink it
	g.Expect(err).NotTo(HaveOccurred())
	bigCommit := f.git.Commit(t, "huge", "main", map[string]string{
		"app/Pulumi.yaml": ociProgram("huge-settings", ""),
		"app/blob.bin":    string(blob),
	}, "a megabyte of noise")
	many := map[string]string{"app/Pulumi.yaml": ociProgram("many-settings", "")}
	for i := range 80 {
		many[fmt.Sprintf("app/vendor/f%02d.txt", i)] = "x"
	}
	manyCommit := f.git.Commit(t, "many", "main", many, "eighty files")
	f.start(t, "--artifact-max-size=256Ki", "--artifact-max-files=50")

	ok := f.stack("ordinary")
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())

	for _, c := range []struct {
		repo, commit, cm, bound, flag string
	}{
		{"huge", bigCommit, "huge-settings", "size of the fetched objects limit of 262144 bytes", "--artifact-max-size"},
		{"many", manyCommit, "many-settings", "file count limit of 50 files", "--artifact-max-files"},
	} {
		s := f.stack(c.repo, func(s *v1alpha1.Stack) { s.Spec.Source.Git.URL = f.git.URL(c.repo) })
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
		got := waitNotReady(t, client.ObjectKeyFromObject(s), v1alpha1.ArtifactFailedReason)
		msg := readyMessage(got)
		g.Expect(msg).To(ContainSubstring(c.bound), c.repo)
		g.Expect(msg).To(ContainSubstring(c.flag), c.repo)
		g.Expect(msg).To(ContainSubstring(c.commit), "%s: the revision over the bound", c.repo)
		g.Expect(conditions.IsStalled(got)).To(BeTrue(), "%s: retrying the same revision cannot help", c.repo)
		g.Expect(got.Status.History).To(BeEmpty(), "%s: no operation ran", c.repo)
		var cm corev1.ConfigMap
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: c.cm}, &cm)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: nothing applied: %v", c.repo, err)
	}

	waitApplied(t, client.ObjectKeyFromObject(ok), f.commit)
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(1), "only the ordinary Stack ran")
}
