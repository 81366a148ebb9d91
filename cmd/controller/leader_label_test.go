package main

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The leader label on the controller's own Pod, in a real API server: a
// restarted replica's Pod loses the label it kept; the Runnable sets it
// while this replica leads and removes it when it stops leading; other
// labels are never touched; outside a Pod nothing is done.
func TestLeaderLabel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	g := NewWithT(t)
	ctx := context.Background()
	env := controlPlane.Get(t)
	ns := env.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stackpilot-controller-abc", Labels: map[string]string{
			"app.kubernetes.io/name": "stackpilot-controller",
			leaderLabel:              "true", // kept from before the container restarted
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "stackpilot-controller"}}},
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	labels := func() map[string]string {
		var p corev1.Pod
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod.Name}, &p)).To(Succeed())
		return p.Labels
	}

	t.Setenv("POD_NAME", "")
	g.Expect(ownPod(ns)).To(BeNil())
	g.Expect(clearLeaderLabel(ctx, env.Client, ownPod(ns))).To(Succeed(), "outside a Pod there is nothing to clear")
	g.Expect(labels()).To(HaveKey(leaderLabel))

	t.Setenv("POD_NAME", pod.Name)
	self := ownPod(ns)
	g.Expect(clearLeaderLabel(ctx, env.Client, self)).To(Succeed())
	g.Expect(labels()).To(Equal(map[string]string{"app.kubernetes.io/name": "stackpilot-controller"}), "the restarted replica is no leader")

	leading, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- (&leaderLabeler{c: env.Client, pod: *self}).Start(leading) }()
	g.Eventually(labels, 30*time.Second, 100*time.Millisecond).Should(HaveKeyWithValue(leaderLabel, "true"))
	g.Expect(labels()).To(HaveKeyWithValue("app.kubernetes.io/name", "stackpilot-controller"))
	stop()
	g.Eventually(done, 30*time.Second).Should(Receive(BeNil()))
	g.Expect(labels()).NotTo(HaveKey(leaderLabel), "a replica that stops leading keeps the label")

	t.Setenv("POD_NAME", "gone")
	g.Expect(clearLeaderLabel(ctx, env.Client, ownPod(ns))).To(Succeed(), "no Pod, no label")
}
