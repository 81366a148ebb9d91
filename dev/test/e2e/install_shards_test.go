package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestInstallShards: `stackpilot install --shards N` on a real API server
// adds a controller per shard with its selector and Services; installing
// again with fewer shards refuses, applying nothing, while a Stack is still
// labelled for a shard that would go, and removes that shard's objects once
// nothing is.
func TestInstallShards(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cp, cl := bareControlPlane(t)
	kc := cp.Kubeconfig
	const sys = "stackpilot-system"
	managerArgs := func(name string) []string {
		var d appsv1.Deployment
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: sys, Name: name}, &d)).To(Succeed())
		return d.Spec.Template.Spec.Containers[0].Args
	}
	exists := func(obj client.Object, name string) bool {
		err := cl.Get(ctx, client.ObjectKey{Namespace: sys, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return false
		}
		g.Expect(err).NotTo(HaveOccurred())
		return true
	}

	_, errOut, code := adminCLI(t, kc, "", "install", "--shards", "2", "--image", "registry.example/sp:v1", "--wait=false")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring("2 shard(s) besides the main controller"))
	g.Expect(managerArgs("stackpilot-controller")).To(ContainElements("--watch-label-selector=!sharding.fluxcd.io/key", "--leader-election-id=stackpilot-controller-leader"))
	for _, s := range []string{"shard1", "shard2"} {
		g.Expect(managerArgs("stackpilot-controller-" + s)).To(ContainElements(
			"--watch-label-selector=sharding.fluxcd.io/key in ("+s+")",
			"--runner-endpoint=https://stackpilot-runner-"+s+".$(POD_NAMESPACE).svc:9444"))
		var svc corev1.Service
		g.Expect(exists(&svc, "stackpilot-runner-"+s)).To(BeTrue())
		g.Expect(svc.Spec.Selector).To(HaveKeyWithValue("app.kubernetes.io/name", "stackpilot-controller-"+s))
		g.Expect(exists(&svc, "stackpilot-controller-"+s)).To(BeTrue())
	}

	// A Stack of shard2: shrinking to one shard is refused, and nothing is
	// applied (the image stays v1).
	g.Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}})).To(Succeed())
	net := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "net", Labels: map[string]string{v1alpha1.ShardLabel: "shard2"}},
		Spec:       v1alpha1.StackSpec{Source: v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://git.example/net.git", Ref: &v1alpha1.GitRef{Branch: "main"}}}},
	}
	g.Expect(cl.Create(ctx, net)).To(Succeed())
	_, errOut, code = adminCLI(t, kc, "", "install", "--shards", "1", "--image", "registry.example/sp:v2", "--wait=false")
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring("the shard(s) shard2 would be removed, but Stack infra/net (shard2) still labelled for them"))
	g.Expect(errOut).To(ContainSubstring("kubectl label stack NAME -n NAMESPACE sharding.fluxcd.io/key=<another shard> --overwrite"))
	var d appsv1.Deployment
	g.Expect(exists(&d, "stackpilot-controller-shard2")).To(BeTrue())
	g.Expect(exists(&d, "stackpilot-controller")).To(BeTrue())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/sp:v1"), "a refused install applies nothing")

	// A Deployment of the user's with a shard label is not the install's.
	mine := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: "mine", Labels: map[string]string{"stackpilot.dev/shard": "shard2"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mine"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "mine"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/mine:v1"}}},
			},
		},
	}
	g.Expect(cl.Create(ctx, mine)).To(Succeed())

	// Moved to shard1, shard2 goes with its Services.
	g.Expect(cl.Patch(ctx, net, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"sharding.fluxcd.io/key":"shard1"}}}`)))).To(Succeed())
	_, errOut, code = adminCLI(t, kc, "", "install", "--shards", "1", "--image", "registry.example/sp:v2", "--wait=false")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring("✔ shard shard2: Deployment stackpilot-system/stackpilot-controller-shard2 removed"))
	g.Eventually(func() bool { return exists(&appsv1.Deployment{}, "stackpilot-controller-shard2") }).Should(BeFalse())
	for _, svc := range []string{"stackpilot-controller-shard2", "stackpilot-runner-shard2"} {
		g.Expect(exists(&corev1.Service{}, svc)).To(BeFalse(), svc)
	}
	g.Expect(exists(&d, "stackpilot-controller-shard1")).To(BeTrue())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/sp:v2"))
	g.Expect(exists(&appsv1.Deployment{}, "mine")).To(BeTrue(), "a Deployment the install did not make was removed")

	// Back to one controller once nothing is labelled: no selector left.
	g.Expect(cl.Patch(ctx, net, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"sharding.fluxcd.io/key":null}}}`)))).To(Succeed())
	_, errOut, code = adminCLI(t, kc, "", "install", "--image", "registry.example/sp:v2", "--wait=false")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(exists(&appsv1.Deployment{}, "stackpilot-controller-shard1")).To(BeFalse())
	g.Expect(managerArgs("stackpilot-controller")).NotTo(ContainElement(HavePrefix("--watch-label-selector")))

	_, errOut, code = adminCLI(t, kc, "", "install", "--shards", "-1", "--export")
	g.Expect(code).To(Equal(2), errOut)
	g.Expect(errOut).To(ContainSubstring("--shards=-1: want 0 to 64"))
}
