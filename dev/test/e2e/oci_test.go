package e2e

import (
	"context"
	"fmt"
	"io/fs"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestStackFromSignedOCIArtifact follows a Stack on a semver range of signed
// artifacts pushed with the CLI: Ready at the first, upgraded at the next
// interval when a new tag in the range is pushed, and left at the last good
// revision when an unsigned artifact, or one signed with another key, is
// pushed. Run with and without the registry's referrers API: the bundle
// then lives under the referrers tag schema.
func TestStackFromSignedOCIArtifact(t *testing.T) {
	t.Parallel()
	for _, referrers := range []bool{true, false} {
		name := "referrers-api"
		if !referrers {
			name = "referrers-tag-schema"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each has its own registry, namespace and controller
			testSignedOCIArtifact(t, referrers)
		})
	}
}

func testSignedOCIArtifact(t *testing.T, referrers bool) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newOCIFixture(t, testenv.WithReferrers(referrers))
	priv, pub := keyPair(t)
	otherPriv, _ := keyPair(t)
	pubPEM, err := os.ReadFile(pub)
	g.Expect(err).NotTo(HaveOccurred())
	createSecret(t, f.ns, "cosign-keys", map[string]string{"cosign.pub": string(pubPEM)})
	ref := f.url("infra/web")
	d1 := pushProgram(t, ref+":1.0.0", "web-settings", "", priv)
	f.start(t)

	stack := f.stack("web", "infra/web", v1alpha1.OCIRef{SemVer: ">=1.0.0 <2.0.0"}, func(s *v1alpha1.Stack) {
		s.Spec.Source.OCI.Verify = &v1alpha1.OCIVerification{Provider: "cosign", SecretRef: v1alpha1.LocalObjectReference{Name: "cosign-keys"}}
		s.Spec.Interval = metav1.Duration{Duration: 5 * time.Second}
	})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitApplied(t, key, "1.0.0@"+d1)
	g.Expect(s.Status.LastAppliedRevision).To(Equal("1.0.0@" + d1))
	g.Expect(configMapData(g, f.ns, "web-settings")).To(HaveKeyWithValue("color", "blue"))

	// A new tag in the range is applied at the next interval, unasked.
	d2 := pushProgram(t, ref+":1.1.0", "web-settings", "\n        size: large", priv)
	waitApplied(t, key, "1.1.0@"+d2)
	g.Expect(configMapData(g, f.ns, "web-settings")).To(HaveKeyWithValue("size", "large"))
	// A tag outside the range is not.
	pushProgram(t, ref+":2.0.0", "web-settings", "\n        size: huge", priv)

	// Unsigned, then signed with another key: VerificationFailed naming the
	// reference; nothing applied.
	for i, signer := range []string{"", otherPriv} {
		tag := []string{"1.2.0", "1.3.0"}[i]
		d := pushProgram(t, ref+":"+tag, "web-settings", "\n        size: tampered", signer)
		waitNotReady(t, key, v1alpha1.VerificationFailedReason)
		g.Eventually(func(g Gomega) {
			g.Expect(readyMessage(getStack(g, key))).To(ContainSubstring(strings.TrimPrefix(ref, "oci://") + ":" + tag + "@" + d))
		}, time.Minute, time.Second).Should(Succeed())
		s = getStack(g, key)
		g.Expect(s.Status.LastAppliedRevision).To(Equal("1.1.0@" + d2))
		g.Expect(configMapData(g, f.ns, "web-settings")).To(HaveKeyWithValue("size", "large"))
		for _, h := range s.Status.History {
			g.Expect(h.Revision).NotTo(ContainSubstring(d), "no operation ran on an unverified artifact")
		}
	}
}

// TestStackFromOCIDigestFluxAndImageLayers: an artifact written exactly as
// Flux writes it is applied; a digest pin never moves when the tag does; a
// program baked into an image layer is applied with layerSelector.
func TestStackFromOCIDigestFluxAndImageLayers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newOCIFixture(t)
	f.start(t)

	// Flux's own format, pinned by digest.
	fluxRef := f.reg.Host() + "/infra/flux"
	pinned := testenv.PushFluxArtifact(t, ctx, fluxRef+":v1", programDir(t, "flux-settings", ""), "https://git.example/infra", "main@sha1:0123456789abcdef0123456789abcdef01234567")
	stack := f.stack("flux", "infra/flux", v1alpha1.OCIRef{Digest: pinned})
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	s := waitApplied(t, key, pinned)
	g.Expect(s.Status.LastAppliedRevision).To(Equal(pinned), "a digest pin's revision is the digest alone")
	g.Expect(configMapData(g, f.ns, "flux-settings")).To(HaveKeyWithValue("color", "blue"))

	moved := testenv.PushFluxArtifact(t, ctx, fluxRef+":v1", programDir(t, "flux-settings", "\n        size: moved"), "https://git.example/infra", "main@sha1:1111111111111111111111111111111111111111")
	g.Expect(moved).NotTo(Equal(pinned))
	value := requestReconcile(t, key)
	s = waitHandled(t, key, value)
	g.Expect(s.Status.LastAppliedRevision).To(Equal(pinned))
	g.Expect(configMapData(g, f.ns, "flux-settings")).NotTo(HaveKey("size"))

	// An image whose layer is a plain tar+gzip of the program.
	imageRef := f.reg.Host() + "/infra/image:v1"
	imageDigest := testenv.PushImageLayer(t, ctx, imageRef, programDir(t, "image-settings", ""))
	img := f.stack("image", "infra/image", v1alpha1.OCIRef{Tag: "v1"}, func(s *v1alpha1.Stack) {
		s.Spec.Source.OCI.LayerSelector = &v1alpha1.OCILayerSelector{MediaType: testenv.ImageLayerMediaType}
		s.Spec.DestroyOnDelete = true
	})
	g.Expect(env.Client.Create(ctx, img)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(img), "v1@"+imageDigest)
	g.Expect(configMapData(g, f.ns, "image-settings")).To(HaveKeyWithValue("color", "blue"))

	// Deleted after the cache lost its program (a new data volume) and the tag
	// moved: the destroy pulls the applied digest again.
	testenv.PushImageLayer(t, ctx, imageRef, programDir(t, "image-settings", "\n        size: moved"))
	emptyArtifactCache(t, f.dataDir)
	g.Expect(env.Client.Delete(ctx, img)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(img), &v1alpha1.Stack{}))
	}, 3*time.Minute, time.Second).Should(BeTrue(), "Ready: %s", readyMessage(getStack(g, client.ObjectKeyFromObject(img))))
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "image-settings"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "destroyed: %v", err)
}

// emptyArtifactCache removes every tree and index entry of the controller's
// artifact cache, whose trees are read-only.
func emptyArtifactCache(t *testing.T, dataDir string) {
	t.Helper()
	for _, sub := range []string{"sha256", "index"} {
		root := filepath.Join(dataDir, "artifacts", sub)
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestStackFromOCIRefusals: registry credentials come from a
// dockerconfigjson Secret, and a wrong password says so without echoing it;
// a tampered layer, an archive that climbs out of its folder and an
// artifact over --artifact-max-size are refused naming what is wrong, and
// nothing runs.
func TestStackFromOCIRefusals(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const user, password, wrong = "ci", "r3gistry-pa55", "wr0ng-pa55word"
	f := newOCIFixture(t, testenv.WithRegistryBasicAuth(user, password))
	host := f.reg.Host()
	// The CLI takes --creds; the Stack a dockerconfigjson Secret.
	push := func(repo, cm string) string {
		return strings.TrimSpace(stackpilot(t, "artifact", "push", f.url(repo)+":v1", "--path", programDir(t, cm, ""), "--insecure", "--creds", user+":"+password))
	}
	good := push("infra/private", "private-settings")
	createDockerConfigSecret(t, f.ns, "registry", host, user, password)
	createDockerConfigSecret(t, f.ns, "registry-wrong", host, user, wrong)
	f.start(t, "--artifact-max-size=64Ki")

	ok := f.stack("private", "infra/private", v1alpha1.OCIRef{Tag: "v1"}, func(s *v1alpha1.Stack) {
		s.Spec.Source.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "registry"}
	})
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(ok), "v1@"+good)

	bad := f.stack("wrong-password", "infra/private", v1alpha1.OCIRef{Tag: "v1"}, func(s *v1alpha1.Stack) {
		s.Spec.Source.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "registry-wrong"}
	})
	g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
	s := waitNotReady(t, client.ObjectKeyFromObject(bad), v1alpha1.AuthenticationFailedReason)
	g.Expect(readyMessage(s)).To(ContainSubstring(host))
	g.Expect(readyMessage(s)).NotTo(ContainSubstring(wrong))

	// A tampered layer.
	tampered := push("infra/tampered", "tampered-settings")
	f.reg.TamperBlob(testenv.LayerDigest(t, ctx, host+"/infra/tampered@"+tampered, user, password))
	ts := f.stack("tampered", "infra/tampered", v1alpha1.OCIRef{Tag: "v1"}, func(s *v1alpha1.Stack) {
		s.Spec.Source.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "registry"}
	})
	g.Expect(env.Client.Create(ctx, ts)).To(Succeed())
	s = waitNotReady(t, client.ObjectKeyFromObject(ts), v1alpha1.ArtifactFailedReason)
	g.Expect(readyMessage(s)).To(ContainSubstring("failed verification"))

	// Archives that would write outside the tree, and one over the bound.
	for name, entries := range map[string][]testenv.TarEntry{
		"climbs":    {{Name: "app/Pulumi.yaml", Body: ociProgram("x", "")}, {Name: "../escape.txt", Body: "out"}},
		"link-out":  {{Name: "app/Pulumi.yaml", Body: ociProgram("x", "")}, {Name: "app/etc", Linkname: "/etc", Symlink: true}},
		"too-large": {{Name: "app/Pulumi.yaml", Body: ociProgram("x", "")}, {Name: "app/big.bin", Body: strings.Repeat("x", 128<<10)}},
	} {
		d := testenv.PushRawLayer(t, ctx, host+"/infra/"+name+":v1", entries, user, password)
		st := f.stack(name, "infra/"+name, v1alpha1.OCIRef{Tag: "v1"}, func(s *v1alpha1.Stack) {
			s.Spec.Source.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "registry"}
		})
		g.Expect(env.Client.Create(ctx, st)).To(Succeed())
		s := waitStalled(t, client.ObjectKeyFromObject(st))
		msg := readyMessage(s)
		g.Expect(msg).To(ContainSubstring("v1@"+d), name)
		switch name {
		case "climbs":
			g.Expect(msg).To(ContainSubstring("../escape.txt"))
		case "link-out":
			g.Expect(msg).To(ContainSubstring("app/etc"))
		case "too-large":
			g.Expect(msg).To(ContainSubstring("--artifact-max-size"))
		}
		g.Expect(s.Status.History).To(BeEmpty(), "nothing ran for %s", name)
	}
	g.Expect(f.ctrl.Logs(t)).NotTo(ContainSubstring(password))
	g.Expect(f.ctrl.Logs(t)).NotTo(ContainSubstring(wrong))
}

// waitStalled waits until the Stack is Stalled (Ready False with the same reason).
func waitStalled(t *testing.T, key client.ObjectKey) *v1alpha1.Stack {
	t.Helper()
	var last *v1alpha1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		last = getStack(g, key)
		g.Expect(conditions.IsStalled(last)).To(BeTrue(), "Ready: %s", readyMessage(last))
	}, 2*time.Minute, time.Second).Should(Succeed())
	return last
}

// TestHundredOCIStacksShareOneTagLookup: 100 Stacks on one repository and
// tag cost one tag lookup per interval between them. Their artifact holds
// no program at their dir, so no Pulumi process runs and the test measures
// the source alone; such a Stack is checked again every interval.
func TestHundredOCIStacksShareOneTagLookup(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newOCIFixture(t)
	digest := pushProgram(t, f.url("infra/fleet")+":stable", "fleet-settings", "", "")
	const interval = 10 * time.Second
	f.start(t)
	for i := range 100 {
		s := f.stack(fmt.Sprintf("fleet-%03d", i), "infra/fleet", v1alpha1.OCIRef{Tag: "stable"}, func(s *v1alpha1.Stack) {
			s.Spec.Source.Dir = "not-here"
			s.Spec.Interval = metav1.Duration{Duration: interval}
		})
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		var list v1alpha1.StackList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(100))
		for _, s := range list.Items {
			g.Expect(conditions.IsStalled(&s)).To(BeTrue(), "%s: %s", s.Name, readyMessage(&s))
			g.Expect(readyMessage(&s)).To(ContainSubstring("stable@" + digest))
		}
	}, 3*time.Minute, time.Second).Should(Succeed())

	start, startRequests := f.reg.TagLookups("infra/fleet", "stable"), f.reg.Requests()
	began := time.Now()
	time.Sleep(3 * interval)
	lookups := f.reg.TagLookups("infra/fleet", "stable") - start
	requests := f.reg.Requests() - startRequests
	elapsed := time.Since(began)
	t.Logf("100 Stacks, interval %s: %d tag lookups (%d registry requests in all) in %s", interval, lookups, requests, elapsed.Round(time.Second))
	// One per interval, plus one for an interval that straddles the window.
	g.Expect(lookups).To(BeNumerically(">=", 1), "the Stacks are re-checked every interval")
	g.Expect(lookups).To(BeNumerically("<=", int(elapsed/interval)+1))
}
