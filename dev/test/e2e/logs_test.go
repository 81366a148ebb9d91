package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// TestLogsCLI reads Pulumi's output of a real up from the real controller
// through the API server's service proxy, as ServiceAccounts: one allowed
// to get the Stack, one not (both may use the proxy). The output holds no
// secret value (a secret config value, and an envFrom value that the
// program also gets as plain config, so Pulumi itself prints it) and no
// terminal escape; --operation picks an operation; --follow streams a
// running one to its end.
func TestLogsCLI(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cliBinary(t)
	f := newFixture(t)

	// The controller's logs listener on an address the API server may proxy to.
	ip := hostIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	g.Expect(ln.Close()).To(Succeed())
	f.start(t, fmt.Sprintf("--logs-bind-address=%s:%d", ip, port))
	exposeLogs(t, f.ns, ip, port)

	const token, tag = "tok3n-s3cr3t-4242", "t4g-fr0m-env-9191"
	createSecret(t, f.ns, "app-secrets", map[string]string{"token": token})
	createSecret(t, f.ns, "app-env", map[string]string{"TEAM_TAG": tag})
	s := f.stack("logs-cli", func(s *v1alpha1.Stack) {
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-secrets"}}}
		s.Spec.EnvFrom = []v1alpha1.EnvFromSource{{SecretRef: &v1alpha1.OptionalObjectReference{Name: "app-env"}}}
		// Not secret to Pulumi: it prints it in the outputs; the runner must not.
		s.Spec.Config["color"] = apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", tag))}
	})
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	key := client.ObjectKeyFromObject(s)
	applied := waitApplied(t, key, "")
	firstUp := applied.Status.History[0].ID

	reader := serviceAccountKubeconfig(t, f.ns, "log-reader", true)
	outsider := serviceAccountKubeconfig(t, f.ns, "log-outsider", false)
	noSecrets := func(g Gomega, out string) {
		for _, v := range []string{token, tag, passphrase} {
			g.Expect(out).NotTo(ContainSubstring(v))
		}
		g.Expect(out).NotTo(ContainSubstring("\x1b"))
	}

	out, errOut, code := logsCLI(t, reader, f.ns, "logs", s.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(BeEmpty())
	g.Expect(out).To(ContainSubstring("Updating (logs-cli)"))
	g.Expect(out).To(MatchRegexp(`(?m)^ \+ +kubernetes:core/v1:ConfigMap +settings +created`))
	g.Expect(out).To(MatchRegexp(`(?m)^Outputs:\n(?s:.*)^    color +: "\[secret\]"$`))
	g.Expect(out).To(MatchRegexp(`(?m)^    token +: \[secret\]$`))
	g.Expect(out).To(ContainSubstring("Resources:\n    + 2 created\n"))
	noSecrets(g, out)

	// A ServiceAccount that may reach the proxy but not get the Stack.
	_, errOut, code = logsCLI(t, outsider, f.ns, "logs", s.Name)
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(Equal(fmt.Sprintf("stackpilot: not allowed to read the logs of Stack %[1]s/logs-cli: "+
		"system:serviceaccount:%[1]s:log-outsider may not get stacks.stackpilot.dev \"logs-cli\" in namespace %[1]q, which reading its logs needs; "+
		"ask for get on stacks.stackpilot.dev in namespace %[1]s\n", f.ns)))

	// A change: a second up, followed while it runs.
	patch := client.MergeFrom(getStack(g, key))
	changed := getStack(g, key)
	changed.Spec.Config["color"] = apiextensionsv1.JSON{Raw: []byte(`"green"`)}
	g.Expect(env.Client.Patch(ctx, changed, patch)).To(Succeed())
	var running string
	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		g.Expect(s.Status.CurrentOperation).NotTo(BeNil())
		running = s.Status.CurrentOperation.ID
	}, 2*time.Minute, 50*time.Millisecond).Should(Succeed())
	followStarted := time.Now()
	out, errOut, code = logsCLI(t, reader, f.ns, "logs", s.Name, "--follow")
	g.Expect(code).To(Equal(0), errOut)
	// The log ends with the runner, a moment before the status says so.
	var finished time.Time
	g.Eventually(func(g Gomega) {
		h := getStack(g, key).Status.History[0]
		g.Expect(h.ID).To(Equal(running))
		g.Expect(h.FinishedAt).NotTo(BeNil())
		finished = h.FinishedAt.Time
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Expect(followStarted.Before(finished)).To(BeTrue(), "the up ended before --follow started: nothing was followed")
	g.Expect(out).To(MatchRegexp(`(?m)^ ~ +kubernetes:core/v1:ConfigMap +settings +updated`))
	g.Expect(out).To(ContainSubstring("Resources:\n    ~ 1 updated\n"))
	g.Expect(out).To(ContainSubstring("Duration: "))
	noSecrets(g, out)
	// Followed to its end: what it printed is the whole log.
	whole, errOut, code := logsCLI(t, reader, f.ns, "logs", s.Name, "--operation", running)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(Equal(whole))

	// --operation: the first up, as it was.
	out, errOut, code = logsCLI(t, reader, f.ns, "logs", s.Name, "--operation", firstUp)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("+ 2 created"))
	g.Expect(out).NotTo(ContainSubstring("updated"))
	_, errOut, code = logsCLI(t, reader, f.ns, "logs", s.Name, "--operation", "up-19700101-000000-00000000")
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(HavePrefix(fmt.Sprintf("stackpilot: Stack %s/logs-cli has no log of operation \"up-19700101-000000-00000000\"", f.ns)))
}

// logsCLI runs the built CLI with kubeconfig in namespace ns.
func logsCLI(t *testing.T, kubeconfig, ns string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, append([]string{"--kubeconfig", kubeconfig, "-n", ns, "--controller-namespace", ns}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("stackpilot %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), 0
}

// exposeLogs makes the Service stackpilot-controller of config/manager in
// ns, port logs, lead to ip:port: the API server's service proxy dials only
// an Endpoints address that is a Pod's IP, and Endpoints refuse loopback, so
// a Pod (never scheduled) carries this machine's address.
func exposeLogs(t *testing.T, ns, ip string, port int32) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stackpilot-controller"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "logs", Port: 9443, TargetPort: intstr.FromInt32(port)}}},
	}
	g.Expect(env.Client.Create(ctx, svc)).To(Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := env.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stackpilot-controller-0"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "stackpilot-controller"}}},
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	//lint:ignore SA1019 the API server's service proxy reads v1 Endpoints
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stackpilot-controller"},
		//lint:ignore SA1019 the API server's service proxy reads v1 Endpoints
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: ip, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name}}},
			Ports:     []corev1.EndpointPort{{Name: "logs", Port: port}},
		}},
	}
	g.Expect(env.Client.Create(ctx, ep)).To(Succeed())
}

// serviceAccountKubeconfig is a kubeconfig file for a new ServiceAccount of
// ns that may read Stacks (get, list: the CLI reads the Stack first) when
// readStacks, and may always use the service proxy (get services/proxy).
func serviceAccountKubeconfig(t *testing.T, ns, name string, readStacks bool) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services/proxy"}, Verbs: []string{"get"}}}
	if readStacks {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"stackpilot.dev"}, Resources: []string{"stacks"}, Verbs: []string{"get", "list"}})
	}
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	})).To(Succeed())
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	user := cfg.Contexts[cfg.CurrentContext].AuthInfo
	cfg.AuthInfos[user].ClientCertificate, cfg.AuthInfos[user].ClientKey = "", ""
	cfg.AuthInfos[user].ClientCertificateData, cfg.AuthInfos[user].ClientKeyData = nil, nil
	cfg.AuthInfos[user].Token = tr.Status.Token
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	g.Expect(os.Chmod(path, 0o600)).To(Succeed())
	return path
}

func ptrTo[T any](v T) *T { return &v }
