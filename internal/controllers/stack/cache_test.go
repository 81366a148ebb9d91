package stack

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/patch"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// recordingCache is the manager's real cache, recording every typed (not
// metadata-only) Secret or ConfigMap it is asked for: each would start an
// informer that keeps every such object of the cluster, data included, in memory.
type recordingCache struct {
	cache.Cache
	mu    sync.Mutex
	typed []string
}

func (c *recordingCache) record(obj runtime.Object, how string) {
	switch obj.(type) {
	case *corev1.Secret, *corev1.SecretList, *corev1.ConfigMap, *corev1.ConfigMapList:
		c.mu.Lock()
		defer c.mu.Unlock()
		c.typed = append(c.typed, how+" "+typeName(obj))
	}
}

func typeName(obj runtime.Object) string {
	gvks, _, err := clientgoscheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return "?"
	}
	return gvks[0].Kind
}

func (c *recordingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.record(obj, "Get")
	return c.Cache.Get(ctx, key, obj, opts...)
}

func (c *recordingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.record(list, "List")
	return c.Cache.List(ctx, list, opts...)
}

func (c *recordingCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	c.record(obj, "GetInformer")
	return c.Cache.GetInformer(ctx, obj, opts...)
}

func (c *recordingCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if gvk.Group == "" && (gvk.Kind == "Secret" || gvk.Kind == "ConfigMap") {
		c.mu.Lock()
		c.typed = append(c.typed, "GetInformerForKind "+gvk.Kind)
		c.mu.Unlock()
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

func (c *recordingCache) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.typed...)
}

// TestPublishCachesNoSecret: the manager is built as the controller builds it
// (its watches included), against a real API server; publishing outputs
// (create, then update) and checking them for drift reads no Secret or
// ConfigMap through the cache, so no typed informer holds their data.
func TestPublishCachesNoSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pinned control plane (make tools)")
	}
	g := NewWithT(t)
	root, bin, err := testenv.Paths()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testenv.RequireBinaries(bin, "etcd", "kube-apiserver")).To(Succeed())
	t.Setenv("KUBEBUILDER_ASSETS", bin)
	envt := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := envt.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = envt.Stop() })

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	rec := &recordingCache{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		NewCache: func(config *rest.Config, opts cache.Options) (cache.Cache, error) {
			inner, err := cache.New(config, opts)
			rec.Cache = inner
			return rec, err
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	r, err := NewStackReconciler(mgr, Config{DataDir: t.TempDir(),
		DigestKeySecret: types.NamespacedName{Namespace: "default", Name: "stackpilot-digest-key"}})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g.Expect(r.SetupWithManager(ctx, mgr, Options{MaxConcurrentReconciles: 1})).To(Succeed())
	go func() { _ = mgr.Start(ctx) }()
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cache-test"}}
	g.Expect(direct.Create(ctx, ns)).To(Succeed())
	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns.Name},
		Spec: v1alpha1.StackSpec{
			Source:  v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://git.example/infra"}},
			Suspend: true, // the controller leaves it alone: this test drives the step
			Outputs: &v1alpha1.OutputsTarget{SecretName: "app-outputs", ConfigMapName: "app-outputs"},
		},
	}
	g.Expect(direct.Create(ctx, stack)).To(Succeed())

	st := &reconcileState{stack: stack, patcher: patch.NewSerialPatcher(stack, mgr.GetClient()), inputs: &inputs{}}
	for _, color := range []string{"blue", "green"} {
		st.result = &runner.Result{Outputs: map[string]runner.Output{
			"color": {Value: color}, "token": {Value: "s3cr3t", Secret: true},
		}}
		_, err = r.publishOutputs(ctx, st)
		g.Expect(err).NotTo(HaveOccurred())
		var sec corev1.Secret
		g.Expect(direct.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "app-outputs"}, &sec)).To(Succeed())
		g.Expect(string(sec.Data["color"])).To(Equal(color))
		g.Expect(metav1.IsControlledBy(&sec, stack)).To(BeTrue())
	}
	// The inputs digest's key Secret is created and read without the cache too.
	key, err := r.DigestKey.Get(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(key).NotTo(BeEmpty())
	stack.Status.Outputs, _ = statusOutputs(st.result.Outputs, stack.Spec.Outputs)
	drift, err := r.outputsDrift(ctx, stack)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drift).To(BeEmpty())

	// The reconciler ran too (the suspended Stack got its finalizer), so the
	// Stack informer is there; no typed Secret or ConfigMap one ever was.
	g.Eventually(func(g Gomega) {
		var s v1alpha1.Stack
		g.Expect(direct.Get(ctx, client.ObjectKeyFromObject(stack), &s)).To(Succeed())
		g.Expect(s.Finalizers).To(ContainElement(v1alpha1.StackFinalizer))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(rec.seen()).To(BeEmpty(), "typed reads through the manager's cache")

	// The API server holds status.outputs to the same bounds. The running
	// reconciler may write the status between a read and an update: a
	// conflict is tried again on the newer Stack.
	setOutputs := func(outputs map[string]string) error {
		for {
			var s v1alpha1.Stack
			if err := direct.Get(ctx, client.ObjectKeyFromObject(stack), &s); err != nil {
				return err
			}
			s.Status.Outputs = outputs
			if err := direct.Status().Update(ctx, &s); !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	err = setOutputs(map[string]string{"big": strings.Repeat("x", v1alpha1.MaxStatusOutputValue+1)})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a value over 1 KiB: %v", err)
	many := map[string]string{}
	for i := range v1alpha1.MaxStatusOutputs + 1 {
		many[fmt.Sprintf("k%03d", i)] = "1"
	}
	err = setOutputs(many)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "more than 100 outputs: %v", err)
	made, _ := statusOutputs(map[string]runner.Output{"big": {Value: strings.Repeat("x", 2<<20)}}, stack.Spec.Outputs)
	g.Expect(setOutputs(made)).To(Succeed(), "what statusOutputs makes is accepted")
}
