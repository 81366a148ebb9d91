package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/dev/internal/postgres"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// probeReport is what dev/internal/cluster/netprobe writes to its termination message.
type probeReport struct {
	Addrs       []string          `json:"addrs"`
	TCP         string            `json:"tcp"`
	API         string            `json:"api"`
	Unreachable map[string]string `json:"unreachable"`
	Status      map[string]string `json:"status"`
}

// TestPodNetwork proves the Pod network the Job executor's Pods use: in a
// namespace that enforces the restricted Pod Security Standard, a Pod that is
// not hostNetwork is admitted, gets an address in the cluster's subnet, reaches
// a server on the gateway and the API server at gateway:port with its
// projected token (checking the API server's certificate against the
// cluster's CA), and reaches nothing beyond the bridge. The user image
// (PulumiImageSpec) runs `pulumi stack ls` under the same restrictions against
// a PostgreSQL backend on the gateway.
func TestPodNetwork(t *testing.T) {
	testenv.RequireCluster(t)
	// PostgreSQL comes from the same script as containerd (make system-packages).
	if err := postgres.Requirements(); err != nil {
		if os.Getenv(testenv.RequireClusterEnv) == "1" {
			t.Fatalf("%s=1 but: %v", testenv.RequireClusterEnv, err)
		}
		t.Skip(err)
	}
	c := testenv.StartCluster(t, nil)
	g := NewWithT(t)
	ctx := context.Background()
	k := c.Client
	_, subnet, err := net.ParseCIDR(c.PodSubnet)
	g.Expect(err).NotTo(HaveOccurred())

	// The probe image, built like the pause image.
	work := t.TempDir()
	probeBin := filepath.Join(work, "netprobe")
	g.Expect(cluster.BuildStatic(ctx, filepath.Join(c.Root, "dev"), "./internal/cluster/netprobe", probeBin)).To(Succeed())
	probeImg, err := cluster.BuildImage(cluster.ImageSpec{
		Binaries:   []cluster.File{{Path: "/netprobe", Source: probeBin}},
		Entrypoint: []string{"/netprobe"},
		User:       "65532:65532",
	}, filepath.Join(work, "layers"))
	g.Expect(err).NotTo(HaveOccurred())
	probeRef, err := cluster.Push(ctx, probeImg, c.Registry, "stackpilot/netprobe", "1")
	g.Expect(err).NotTo(HaveOccurred())

	// A server on the gateway, which Pods must reach; one on each of the
	// host's other addresses, which they must not (the host itself can).
	gateway := serveLine(t, c.PodGateway, "hello from the gateway")
	beyond := []string{"10.255.255.1:443"}
	for _, ip := range hostAddrs(t, subnet) {
		addr := serveLine(t, ip, "hello from beyond the bridge")
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		g.Expect(err).NotTo(HaveOccurred(), "the host cannot reach its own %s", addr)
		conn.Close()
		beyond = append(beyond, addr)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podnet", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	g.Expect(k.Create(ctx, ns)).To(Succeed())
	// The label is enforced: a Pod without the restricted securityContext is refused.
	loose := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "loose", Namespace: ns.Name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: probeRef}}},
	}
	err = k.Create(ctx, loose)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a Pod that is not restricted was admitted: %v", err)

	pod := restrictedPod(ns.Name, "probe", probeRef, c.PodNetworkEnv(), []string{
		"-tcp=" + gateway,
		"-api=https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)/api",
		"-token=/var/run/secrets/stackpilot/token",
		"-ca=/var/run/secrets/stackpilot/ca.crt",
		"-unreachable=" + strings.Join(beyond, ","),
	})
	g.Expect(k.Create(ctx, pod)).To(Succeed())
	done := waitSucceeded(t, k, c, pod)
	g.Expect(done.Spec.HostNetwork).To(BeFalse())
	g.Expect(subnet.Contains(net.ParseIP(done.Status.PodIP))).To(BeTrue(), "Pod IP %s is not in %s", done.Status.PodIP, subnet)
	msg := done.Status.ContainerStatuses[0].State.Terminated.Message
	t.Logf("probe (Pod IP %s): %s", done.Status.PodIP, msg)
	var r probeReport
	g.Expect(json.Unmarshal([]byte(msg), &r)).To(Succeed(), "termination message: %q", msg)
	g.Expect(r.Addrs).To(ConsistOf(done.Status.PodIP))
	// The securityContext is applied, not only admitted: runc's seccomp
	// filter (mode 2) with no new privileges, no capability, not root.
	g.Expect(r.Status).To(Equal(map[string]string{
		"Seccomp": "2", "NoNewPrivs": "1", "CapEff": "0000000000000000", "Uid": "65532 65532 65532 65532",
	}))
	g.Expect(r.TCP).To(Equal("ok: hello from the gateway"))
	// /api needs an authenticated user: 200 says the projected token was accepted.
	g.Expect(r.API).To(Equal("status 200"))
	g.Expect(r.Unreachable).To(HaveLen(len(beyond)))
	for addr, got := range r.Unreachable {
		g.Expect(got).To(HavePrefix("error: "), "the Pod reached %s, beyond the bridge", addr)
	}

	// The user image, as its nonroot user with HOME on an emptyDir /tmp,
	// lists the stacks of a PostgreSQL backend on the gateway (the URL, with
	// its password, from a Secret).
	pg, err := postgres.Start(ctx, postgres.Options{ListenAddrs: []string{c.PodGateway}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(pg.Stop)
	pulumiOnHost(t, c.BinDir, pg, "stack", "init", "podnet-probe")
	g.Expect(k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "backend", Namespace: ns.Name},
		StringData: map[string]string{"url": pg.URLAt(c.PodGateway)},
	})).To(Succeed())
	pulumiRef, err := cluster.PushPulumiImage(ctx, []string{c.BinDir}, filepath.Join(c.BinDir, ".image-cache"), c.Registry, "e2e")
	g.Expect(err).NotTo(HaveOccurred())
	env := append(c.PodNetworkEnv(), corev1.EnvVar{Name: "PULUMI_BACKEND_URL", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "backend"}, Key: "url"},
	}})
	pulumi := restrictedPod(ns.Name, "pulumi", pulumiRef, env, []string{"stack", "ls", "--all", "--non-interactive"})
	pulumi.Spec.Containers[0].Command = []string{"pulumi"}
	g.Expect(k.Create(ctx, pulumi)).To(Succeed())
	waitSucceeded(t, k, c, pulumi)
	g.Expect(c.ContainerLogs(ns.Name, "pulumi")).To(ContainSubstring("podnet-probe"))
}

// pulumiOnHost runs bin/pulumi against the server's backend on 127.0.0.1, in
// a project of its own with a temporary HOME.
func pulumiOnHost(t *testing.T, bin string, pg *postgres.Server, args ...string) {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "Pulumi.yaml"), []byte("name: podnet\nruntime: yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "PULUMI_HOME="+filepath.Join(home, ".pulumi"),
		"PULUMI_BACKEND_URL="+pg.URL(), "PULUMI_CONFIG_PASSPHRASE=podnet", "PULUMI_SKIP_UPDATE_CHECK=true")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, strings.ReplaceAll(string(out), pg.Password, "<password>"))
	}
}

// restrictedPod is a Pod that the restricted Pod Security Standard admits,
// with its token and the cluster's CA in a projected volume (no automounted
// token) and an emptyDir on /tmp.
func restrictedPod(namespace, name, image string, env []corev1.EnvVar, args []string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				RunAsGroup:     ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            name,
				Image:           image,
				ImagePullPolicy: corev1.PullAlways,
				Args:            args,
				Env:             env,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "credentials", MountPath: "/var/run/secrets/stackpilot", ReadOnly: true},
					{Name: "tmp", MountPath: "/tmp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "credentials", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
						{ConfigMap: &corev1.ConfigMapProjection{
							LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
						}},
					},
				}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// waitSucceeded waits for pod to end and fails the test unless it Succeeded.
func waitSucceeded(t *testing.T, k client.Client, c *testenv.Cluster, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	ok := NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed), "%s", got.Status.Phase)
	}, 3*time.Minute, time.Second).Should(Succeed())
	if !ok || got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("Pod %s did not succeed: %s\n%s", pod.Name, c.PodsSummary(context.Background(), pod.Namespace),
			c.ContainerLogs(pod.Namespace, pod.Spec.Containers[0].Name))
	}
	return got
}

// serveLine serves line to every connection on ip (any port) until the test
// ends, and returns its address.
func serveLine(t *testing.T, ip, line string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(conn, line)
			conn.Close()
		}
	}()
	return l.Addr().String()
}

// hostAddrs are this machine's IPv4 addresses outside loopback and the Pod subnet.
func hostAddrs(t *testing.T, subnet *net.IPNet) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !subnet.Contains(n.IP) {
			out = append(out, n.IP.String())
		}
	}
	return out
}
