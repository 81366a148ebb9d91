package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// What the controller's cache keeps of an object, in a real API server with
// the manager's cache options: a Stack written by two field managers and
// carrying kubectl's last-applied copy loses its managedFields and that copy, and
// keeps its other annotations (the reconcile-now request is read from the
// cache), labels and status; a Secret, watched as metadata, keeps its name
// and resourceVersion and no annotation (one held its data).
func TestCacheKeepsWhatTheControllerReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	g := NewWithT(t)
	ctx := context.Background()
	env := controlPlane.Get(t)
	ns := env.Namespace(t)

	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app",
			Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{
				v1alpha1.ReconcileRequestAnnotation: "now",
				lastAppliedAnnotation:               `{"spec":{"source":{"git":{"url":"https://git.example/app.git"}}}}`,
			}},
		Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{
			Git: &v1alpha1.GitSource{URL: "https://git.example/app.git", Ref: &v1alpha1.GitRef{Branch: "main"}}}},
	}
	g.Expect(env.Client.Create(ctx, stack, client.FieldOwner("kubectl"))).To(Succeed())
	before := stack.DeepCopy()
	stack.Status.LastAppliedRevision = "main@sha1:0123456789abcdef0123456789abcdef01234567"
	g.Expect(env.Client.Status().Patch(ctx, stack, client.MergeFrom(before), client.FieldOwner("stackpilot"))).To(Succeed())

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "passphrase",
		Annotations: map[string]string{lastAppliedAnnotation: `{"data":{"passphrase":"c2VjcmV0"}}`, "note": "x"}},
		Data: map[string][]byte{"passphrase": []byte("secret")}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())

	var fromServer v1alpha1.Stack
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, &fromServer)).To(Succeed())
	g.Expect(fromServer.ManagedFields).NotTo(BeEmpty(), "the API server keeps them: without them this test shows nothing")

	opts := cacheOptions(nil, []string{ns})
	opts.Scheme = testScheme()
	c, err := cache.New(env.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Start(cctx) }()

	var cached v1alpha1.Stack
	g.Eventually(func() error {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app"}, &cached)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(cached.ManagedFields).To(BeEmpty())
	g.Expect(cached.Annotations).To(Equal(map[string]string{v1alpha1.ReconcileRequestAnnotation: "now"}))
	g.Expect(cached.Labels).To(Equal(map[string]string{"team": "a"}))
	g.Expect(cached.Status.LastAppliedRevision).To(Equal(stack.Status.LastAppliedRevision))
	g.Expect(cached.Spec).To(Equal(fromServer.Spec))

	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	g.Eventually(func() error {
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "passphrase"}, meta)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(meta.Annotations).To(BeEmpty())
	g.Expect(meta.ManagedFields).To(BeEmpty())
	g.Expect(meta.ResourceVersion).NotTo(BeEmpty())
	raw, err := json.Marshal(meta)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("c2VjcmV0"))
}
