package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostNetworkEnv is what every Pod on this cluster needs to reach the API
// server: there is no kube-proxy, so the service IP leads nowhere.
func (c *Cluster) HostNetworkEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: fmt.Sprint(c.APIServerPort)},
	}
}

// PodNetworkEnv is what a Pod that is not hostNetwork needs to reach the API
// server: there is no kube-proxy, so the kubernetes Service's ClusterIP leads
// nowhere; the API server listens on the Pod network's gateway, which its
// certificate names.
func (c *Cluster) PodNetworkEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: c.PodGateway},
		{Name: "KUBERNETES_SERVICE_PORT", Value: fmt.Sprint(c.APIServerPort)},
	}
}

// Smoke runs a one-shot Pod (host network, the pause image from the loopback
// registry, exiting after a second) in namespace default and waits for it to
// succeed; it returns how long that took. The Pod is deleted afterwards.
func (c *Cluster) Smoke(ctx context.Context) (time.Duration, error) {
	cs, err := c.Clientset()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	name := fmt.Sprintf("smoke-%d", start.UnixNano())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork:   true,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "smoke",
				Image:           c.Registry + "/" + PauseRepository + ":" + PauseTag,
				ImagePullPolicy: corev1.PullAlways,
				Args:            []string{"-sleep=1s"},
				Env:             c.HostNetworkEnv(),
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	defer func() {
		_ = cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	}()
	var phase corev1.PodPhase
	err = c.poll(ctx, 3*time.Minute, "smoke Pod "+name+" Succeeded", func() (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		if phase == corev1.PodFailed {
			return false, fmt.Errorf("pod failed: %s", podSummary(p))
		}
		return phase == corev1.PodSucceeded, nil
	})
	return time.Since(start), err
}

// podSummary is one line about why a Pod is where it is.
func podSummary(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	if p.Status.Reason != "" || p.Status.Message != "" {
		s += fmt.Sprintf(" (%s: %s)", p.Status.Reason, p.Status.Message)
	}
	for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		switch {
		case st.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting: %s %s", st.Name, st.State.Waiting.Reason, st.State.Waiting.Message)
		case st.State.Terminated != nil:
			s += fmt.Sprintf("; %s terminated: %s exit %d %s", st.Name, st.State.Terminated.Reason, st.State.Terminated.ExitCode, st.State.Terminated.Message)
		}
	}
	return s
}
