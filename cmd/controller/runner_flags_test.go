package main

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// --default-executor takes the two names spec.runner.executor takes, as
// written there; anything else stops the start, naming both.
func TestCheckExecutor(t *testing.T) {
	g := NewWithT(t)
	g.Expect(checkExecutor("Local")).To(Succeed())
	g.Expect(checkExecutor("Job")).To(Succeed())
	for _, bad := range []string{"", "job", "Pod", "local"} {
		err := checkExecutor(bad)
		g.Expect(err).To(HaveOccurred(), bad)
		g.Expect(err.Error()).To(ContainSubstring("want Local (operations run as processes of the controller) or Job"))
	}
}

// The runner endpoint defaults to the stackpilot-runner Service of the
// controller's namespace, and only an https URL is accepted.
func TestRunnerEndpoint(t *testing.T) {
	g := NewWithT(t)
	g.Expect(defaultRunnerEndpoint("platform")).To(Equal("https://stackpilot-runner.platform.svc:9444"))
	g.Expect(checkRunnerEndpoint(defaultRunnerEndpoint("platform"))).To(Succeed())
	g.Expect(checkRunnerEndpoint("https://10.0.0.7:9444")).To(Succeed())
	for _, bad := range []string{"http://stackpilot-runner.x.svc:9444", "stackpilot-runner:9444", "https://", "https://u:p@h:9444"} {
		g.Expect(checkRunnerEndpoint(bad)).To(MatchError(ContainSubstring("want an https URL")), bad)
	}
}

// The node's image ID pins the runner image to the digest the controller
// runs, under the controller's own repository name; an ID that names no
// pullable digest leaves the image as written.
func TestPinnedImage(t *testing.T) {
	g := NewWithT(t)
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	g.Expect(pinnedImage("ghcr.io/stackpilot/stackpilot-controller:v1.2.3", "ghcr.io/stackpilot/stackpilot-controller@"+d)).
		To(Equal("ghcr.io/stackpilot/stackpilot-controller@" + d))
	g.Expect(pinnedImage("127.0.0.1:5000/stackpilot-controller", "127.0.0.1:5000/stackpilot-controller@"+d)).
		To(Equal("127.0.0.1:5000/stackpilot-controller@" + d))
	g.Expect(pinnedImage("stackpilot-controller:latest", "docker.io/library/stackpilot-controller@"+d)).
		To(Equal("stackpilot-controller@"+d), "the node's normalised name is not written back")
	g.Expect(pinnedImage("stackpilot-controller:latest", d)).To(BeEmpty(), "a loaded image has no pullable digest")
	g.Expect(pinnedImage("ghcr.io/a/b:v1", "mirror.example/other@"+d)).To(BeEmpty(), "another repository")
}

// In a Pod, --runner-image defaults to the controller's own container's
// image, read from its Pod in a real API server: pinned to the digest the
// node reports once it reports one.
func TestOwnImage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	g := NewWithT(t)
	ctx := context.Background()
	env := controlPlane.Get(t)
	ns := env.Namespace(t)
	const image = "registry.example/stackpilot-controller:v9.9.9"
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stackpilot-controller-abc"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "registry.example/proxy:v1"},
			{Name: "manager", Image: image},
		}},
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())

	got, err := ownImage(ctx, env.Client, ns, pod.Name, "manager")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(image), "no status yet: the image as written")

	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "sidecar", Image: "registry.example/proxy:v1", ImageID: "registry.example/proxy@sha256:" + strings.Repeat("f", 64)},
		{Name: "manager", Image: image, ImageID: "registry.example/stackpilot-controller@" + d},
	}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	got, err = ownImage(ctx, env.Client, ns, pod.Name, "manager")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("registry.example/stackpilot-controller@"+d), "the digest the node pulled")

	_, err = ownImage(ctx, env.Client, ns, pod.Name, "controller")
	g.Expect(err).To(MatchError(ContainSubstring(`has no container "controller": pass --runner-image`)))
	_, err = ownImage(ctx, env.Client, ns, "gone", "manager")
	g.Expect(err).To(MatchError(ContainSubstring("pass the flag, or grant get on pods")))

	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("POD_NAME", pod.Name)
	got, err = runnerImage(ctx, env.Client, "", "Job")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HavePrefix("registry.example/stackpilot-controller@"))
	got, err = runnerImage(ctx, env.Client, "pulumi/pulumi-nodejs:3", "Job")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("pulumi/pulumi-nodejs:3"), "the flag wins")
	t.Setenv("POD_NAME", "")
	_, err = runnerImage(ctx, env.Client, "", "Job")
	g.Expect(err).To(MatchError(ContainSubstring("--default-executor=Job needs --runner-image")))
	got, err = runnerImage(ctx, env.Client, "", "Local")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty())
}
