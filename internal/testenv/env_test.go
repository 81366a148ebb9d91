package testenv

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestControlPlane starts the pinned control plane and checks what tests rely on:
// the garbage collector finishes foreground deletes (Start waits for it), the
// kubeconfig file works for child processes, and namespaces are fresh per test.
func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pinned control plane (make tools)")
	}
	t.Parallel() // its own control plane
	g := NewWithT(t)
	env, err := Start(Options{})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()

	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(HavePrefix("https://127.0.0.1:"), "loopback only")

	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	g.Expect(ns1).NotTo(Equal(ns2))
	var got corev1.Namespace
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns1}, &got)).To(Succeed())

}
