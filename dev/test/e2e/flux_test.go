package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// fluxObject makes a source.toolkit.fluxcd.io/v1 object.
func fluxObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
	return u
}

// sourceRefStack is the fixture's Stack following a Flux source instead of Git.
func (f *fixture) sourceRefStack(name string, ref v1alpha1.FluxSourceReference, mutate ...func(*v1alpha1.Stack)) *v1alpha1.Stack {
	return f.stack(name, append([]func(*v1alpha1.Stack){func(s *v1alpha1.Stack) {
		s.Spec.Source.Git = nil
		s.Spec.Source.SourceRef = &ref
		s.Spec.Outputs = nil
	}}, mutate...)...)
}

// TestStackFollowsGitRepository: a Stack following a Flux GitRepository on
// the in-process Git server is Ready at the artifact source-controller
// publishes; a new commit is applied as soon as source-controller publishes
// it, through the watch, long before the Stack's own interval (1h); a
// commit outside the Stack's dir starts no up; deleting the GitRepository
// with its destroyOnDelete Stack still destroys the stack.
func TestStackFollowsGitRepository(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	env.StartSourceControllerIn(t, f.ns)
	f.start(t)

	repo := fluxObject("GitRepository", f.ns, "infra", map[string]any{
		"url":      f.repoURL,
		"interval": "2s",
		"ref":      map[string]any{"branch": "main"},
	})
	g.Expect(env.Client.Create(ctx, repo)).To(Succeed())
	stack := f.sourceRefStack("bridge", v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "infra"}, func(s *v1alpha1.Stack) {
		s.Spec.DestroyOnDelete = true
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitApplied(t, key, f.commit)
	g.Expect(s.Status.LastAppliedRevision).To(Equal("main@sha1:"+f.commit), "Flux's revision form")
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("color", "blue"))
	ups := len(s.Status.History)

	// A new commit: no reconcile request, the Stack's interval is an hour.
	pushed := time.Now()
	next := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: large")}, "size")
	var published time.Time
	g.Eventually(func(g Gomega) {
		u := fluxObject("GitRepository", f.ns, "infra", nil)
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
		rev, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "revision")
		g.Expect(rev).To(HaveSuffix(next))
		published = time.Now()
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	waitAppliedFast(t, key, next)
	applied := time.Now()
	t.Logf("commit to artifact %s, artifact to applied %s (Stack interval 1h)", published.Sub(pushed).Round(100*time.Millisecond), applied.Sub(published).Round(100*time.Millisecond))
	g.Expect(configMapData(g, f.ns, "app-settings")).To(HaveKeyWithValue("size", "large"))
	ups++
	// Events carry the revision the way Flux's do.
	g.Eventually(func(g Gomega) {
		var list corev1.EventList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
		var revs []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name == "bridge" {
				revs = append(revs, e.Annotations["stackpilot.dev/revision"])
			}
		}
		g.Expect(revs).To(ContainElement("main@sha1:" + next))
	}, 30*time.Second, time.Second).Should(Succeed())

	// A commit elsewhere in the repository: a new artifact, no up.
	other := f.git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        size: large"), "docs/README.md": "hello"}, "docs")
	s = waitAppliedFast(t, key, other)
	g.Expect(s.Status.History[0].Outcome).To(Equal(v1alpha1.OutcomeSkipped))
	g.Expect(f.ctrl.Operations(t, "up")).To(Equal(ups))

	// Deleted with its source: the cached artifact destroys the stack.
	g.Expect(env.Client.Delete(ctx, repo)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &v1alpha1.Stack{}))
	}, 3*time.Minute, time.Second).Should(BeTrue())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "app-settings"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "destroyed: %v", err)
}

// waitAppliedFast is waitApplied polling every 100ms, for measuring delays.
func waitAppliedFast(t *testing.T, key client.ObjectKey, revision string) *v1alpha1.Stack {
	t.Helper()
	var last *v1alpha1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		last = getStack(g, key)
		g.Expect(conditions.IsReady(last)).To(BeTrue(), "Ready: %s", readyMessage(last))
		g.Expect(last.Status.LastAppliedRevision).To(HaveSuffix(revision))
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
	return last
}

// TestStackFollowsOCIRepository: source-controller reads what `stackpilot
// artifact push` writes, and a Stack follows the OCIRepository.
func TestStackFollowsOCIRepository(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newOCIFixture(t)
	digest := pushProgram(t, f.url("infra/app")+":v1", "oci-flux-settings", "", "")
	env.StartSourceControllerIn(t, f.ns)
	f.start(t)
	g.Expect(env.Client.Create(ctx, fluxObject("OCIRepository", f.ns, "app", map[string]any{
		"url":      f.url("infra/app"),
		"interval": "1m",
		"insecure": true,
		"ref":      map[string]any{"tag": "v1"},
	}))).To(Succeed())
	stack := f.stack("app", "infra/app", v1alpha1.OCIRef{}, func(s *v1alpha1.Stack) {
		s.Spec.Source.OCI = nil
		s.Spec.Source.SourceRef = &v1alpha1.FluxSourceReference{Kind: "OCIRepository", Name: "app"}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	s := waitApplied(t, client.ObjectKeyFromObject(stack), "")
	g.Expect(s.Status.LastAppliedRevision).To(Equal("v1@"+digest), "source-controller's revision of our artifact")
	g.Expect(configMapData(g, f.ns, "oci-flux-settings")).To(HaveKeyWithValue("color", "blue"))
}

// TestStackFollowsExternalArtifact: an ExternalArtifact whose status the
// test writes, serving the tarball itself. A wrong digest is refused naming
// both digests; a source that is not Ready is SourceNotReady with its
// message; a source in another namespace is refused.
func TestStackFollowsExternalArtifact(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	// Two programs, each writing its own ConfigMap.
	tarballs := map[string][]byte{
		"/good.tar.gz":  testenv.TarGz(t, map[string]string{"app/Pulumi.yaml": ociProgram("good-settings", "")}),
		"/fixed.tar.gz": testenv.TarGz(t, map[string]string{"app/Pulumi.yaml": ociProgram("fixed-settings", "")}),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := tarballs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	digestOf := func(path string) string {
		sum := sha256.Sum256(tarballs[path])
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	digest, fixedDigest := digestOf("/good.tar.gz"), digestOf("/fixed.tar.gz")

	publish := func(name, path, revision, digest string, ready bool, message string) {
		t.Helper()
		u := fluxObject("ExternalArtifact", f.ns, name, map[string]any{})
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), u); apierrors.IsNotFound(err) {
			g.Expect(env.Client.Create(ctx, u)).To(Succeed())
		}
		status := metav1.ConditionTrue
		reason := "Succeeded"
		if !ready {
			status, reason = metav1.ConditionFalse, "BuildFailed"
		}
		u.Object["status"] = map[string]any{
			"artifact": map[string]any{
				"url": srv.URL + path, "revision": revision, "digest": digest,
				"path": "x", "lastUpdateTime": time.Now().UTC().Format(time.RFC3339),
			},
			"conditions": []any{map[string]any{
				"type": "Ready", "status": string(status), "reason": reason, "message": message,
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": u.GetGeneration(),
			}},
		}
		g.Expect(env.Client.Status().Update(ctx, u)).To(Succeed())
	}

	publish("good", "/good.tar.gz", "v1@"+digest, digest, true, "built")
	good := f.sourceRefStack("good", v1alpha1.FluxSourceReference{Kind: "ExternalArtifact", Name: "good"})
	g.Expect(env.Client.Create(ctx, good)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(good), "v1@"+digest)

	wrong := "sha256:" + strings.Repeat("ab", 32)
	publish("wrong-digest", "/fixed.tar.gz", "v2@"+wrong, wrong, true, "built")
	bad := f.sourceRefStack("wrong-digest", v1alpha1.FluxSourceReference{Kind: "ExternalArtifact", Name: "wrong-digest"})
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	s := waitNotReady(t, client.ObjectKeyFromObject(bad), v1alpha1.ArtifactFailedReason)
	g.Expect(readyMessage(s)).To(And(ContainSubstring(wrong), ContainSubstring(fixedDigest)))
	g.Expect(s.Status.History).To(BeEmpty())

	publish("broken", "/good.tar.gz", "v3@"+digest, digest, false, "the build of the program failed: exit 3")
	notReady := f.sourceRefStack("not-ready", v1alpha1.FluxSourceReference{Kind: "ExternalArtifact", Name: "broken"})
	g.Expect(env.Client.Create(ctx, notReady)).To(Succeed())
	s = waitNotReady(t, client.ObjectKeyFromObject(notReady), v1alpha1.SourceNotReadyReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("the build of the program failed: exit 3"))

	missing := f.sourceRefStack("missing", v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "nowhere"})
	g.Expect(env.Client.Create(ctx, missing)).To(Succeed())
	s = waitNotReady(t, client.ObjectKeyFromObject(missing), v1alpha1.SourceNotReadyReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("GitRepository " + f.ns + "/nowhere"))

	other := env.Namespace(t)
	cross := f.sourceRefStack("cross", v1alpha1.FluxSourceReference{Kind: "ExternalArtifact", Name: "good", Namespace: other})
	g.Expect(env.Client.Create(ctx, cross)).To(Succeed())
	s = waitStalled(t, client.ObjectKeyFromObject(cross))
	g.Expect(conditions.GetReason(s, v1alpha1.ReadyCondition)).To(Equal(v1alpha1.CrossNamespaceRefNotAllowedReason))
	g.Expect(readyMessage(s)).To(ContainSubstring("--allow-cross-namespace-refs"))

	// Fixed: publishing the right digest applies at once, through the watch.
	publish("wrong-digest", "/fixed.tar.gz", "v2@"+fixedDigest, fixedDigest, true, "built")
	waitApplied(t, client.ObjectKeyFromObject(bad), "v2@"+fixedDigest)
	g.Expect(configMapData(g, f.ns, "fixed-settings")).To(HaveKeyWithValue("color", "blue"))
}

// TestStackFollowsSourceInAnotherNamespace: with --allow-cross-namespace-refs
// a Stack follows a source in another namespace.
func TestStackFollowsSourceInAnotherNamespace(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	sources := env.Namespace(t)
	f.start(t, "--allow-cross-namespace-refs")
	env.StartSourceControllerIn(t, sources)
	g.Expect(env.Client.Create(ctx, fluxObject("GitRepository", sources, "infra", map[string]any{
		"url": f.repoURL, "interval": "2s", "ref": map[string]any{"branch": "main"},
	}))).To(Succeed())
	stack := f.sourceRefStack("cross", v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "infra", Namespace: sources})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(stack), f.commit)
}

// TestStackFollowsBucket: a Flux Bucket (generic provider) on an in-process
// S3 server gives a Ready Stack, and a changed object is applied when
// source-controller publishes it.
func TestStackFollowsBucket(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	s3 := testenv.NewS3(t, "infra")
	s3.Put(t, "infra", "app/Pulumi.yaml", ociProgram("bucket-settings", ""))
	env.StartSourceControllerIn(t, f.ns)
	f.start(t)
	g.Expect(env.Client.Create(ctx, fluxObject("Bucket", f.ns, "infra", map[string]any{
		"provider":   "generic",
		"bucketName": "infra",
		"endpoint":   s3.Host(),
		"insecure":   true,
		"interval":   "2s",
	}))).To(Succeed())
	stack := f.sourceRefStack("bucket", v1alpha1.FluxSourceReference{Kind: "Bucket", Name: "infra"})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitApplied(t, key, "")
	g.Expect(s.Status.LastAppliedRevision).To(HavePrefix("sha256:"), "a Bucket's revision is its digest")
	g.Expect(configMapData(g, f.ns, "bucket-settings")).To(HaveKeyWithValue("color", "blue"))

	first := s.Status.LastAppliedRevision
	s3.Put(t, "infra", "app/Pulumi.yaml", ociProgram("bucket-settings", "\n        size: large"))
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.LastAppliedRevision).NotTo(Equal(first))
		g.Expect(conditions.IsReady(s)).To(BeTrue(), "Ready: %s", readyMessage(s))
		g.Expect(configMapData(g, f.ns, "bucket-settings")).To(HaveKeyWithValue("size", "large"))
	}, 2*time.Minute, time.Second).Should(Succeed())
}

// The API server refuses a malformed spec.source.sourceRef, and accepts the
// sample (config/samples/stack-flux.yaml).
func TestSourceRefSpecValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	for name, tc := range map[string]struct {
		ref v1alpha1.FluxSourceReference
		msg string
	}{
		"unknown kind": {v1alpha1.FluxSourceReference{Kind: "HelmChart", Name: "x"}, "spec.source.sourceRef.kind"},
		"no name":      {v1alpha1.FluxSourceReference{Kind: "GitRepository"}, "spec.source.sourceRef.name"},
	} {
		s := &v1alpha1.Stack{}
		s.Name, s.Namespace = "v", ns
		ref := tc.ref
		s.Spec.Source.SourceRef = &ref
		err := env.Client.Create(ctx, s, client.DryRunAll)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		NewWithT(t).Expect(err.Error()).To(ContainSubstring(tc.msg), name)
	}
	both := &v1alpha1.Stack{}
	both.Name, both.Namespace = "v", ns
	both.Spec.Source.SourceRef = &v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "x"}
	both.Spec.Source.Git = &v1alpha1.GitSource{URL: "https://git.example/x"}
	NewWithT(t).Expect(env.Client.Create(ctx, both, client.DryRunAll)).To(MatchError(ContainSubstring("exactly one source kind")))

	raw, err := os.ReadFile(filepath.Join(env.Root, "config", "samples", "stack-flux.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		u := &unstructured.Unstructured{}
		NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		u.SetNamespace(ns)
		NewWithT(t).Expect(env.Client.Create(ctx, u, client.DryRunAll)).To(Succeed(), u.GetKind())
	}
}
