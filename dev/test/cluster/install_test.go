// Package cluster_test installs Stackpilot the way users do, into a real
// one-node cluster on this machine (dev/internal/cluster): the controller image is
// built without Docker and pulled by containerd from a loopback registry, the
// manifests are config/cluster (config/default plus host networking), and the
// controller reconciles a Stack from a Git server on loopback, serves its
// dashboard through `stackpilot dashboard` (a port-forward), survives the
// deletion of its Pod in the middle of an operation, and uninstalls cleanly.
//
// It needs root, containerd, runc and the CNI plugins (Debian packages, which
// `make test` installs), and `make tools`; without them it is skipped, saying
// why (or fails, under STACKPILOT_REQUIRE_CLUSTER=1, which `make test` sets as root).
package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

const passphrase = "cluster-e2e-passphrase"

// program writes a ConfigMap; with slow, also a Deployment whose Pod becomes
// Ready only after a delay, so that `pulumi up` waits long enough for the test
// to delete the controller's Pod in the middle of it.
func program(color string, slow bool) string {
	p := `name: install-e2e
runtime: yaml
config:
  namespace: {type: string}
  image: {type: string}
resources:
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata: {name: app-settings, namespace: "${namespace}"}
      data: {color: ` + color + `}
`
	if slow {
		p += `  slow:
    type: kubernetes:apps/v1:Deployment
    properties:
      metadata: {name: slow, namespace: "${namespace}"}
      spec:
        replicas: 1
        selector: {matchLabels: {app: slow}}
        template:
          metadata: {labels: {app: slow}}
          spec:
            hostNetwork: true
            terminationGracePeriodSeconds: 1
            containers:
              - name: pause
                image: "${image}"
                readinessProbe:
                  exec: {command: [/pause, -sleep=1ms]}
                  initialDelaySeconds: 40
                  periodSeconds: 2
`
	}
	return p + `outputs:
  color: ` + color + `
`
}

func TestInstall(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))

	timings := map[string]time.Duration{}
	step := func(name string, start time.Time) { timings[name] = time.Since(start).Round(100 * time.Millisecond) }
	defer func() { t.Logf("timings: %v", timings) }()
	start := time.Now()
	c := testenv.StartCluster(t, scheme)
	step("cluster-up", start)
	cli := buildCLI(t, c.Root)
	g := NewWithT(t)
	ctx := context.Background()
	k := c.Client
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller pods: %s\ncontroller logs:\n%s", c.PodsSummary(ctx, cluster.SystemNamespace), cluster.Tail(controllerLogs(c), 80))
			logs, _ := filepath.Glob(filepath.Join(c.Dir, "volumes", "*", "operations", "*", "runner.log"))
			for _, f := range logs {
				data, _ := os.ReadFile(f)
				t.Logf("==> %s\n%s", f, cluster.Tail(string(data), 40))
			}
		}
	})

	start = time.Now()
	image, err := cluster.PushControllerImage(ctx, c.Root, []string{c.BinDir}, filepath.Join(c.BinDir, ".image-cache"), c.Registry, "e2e")
	g.Expect(err).NotTo(HaveOccurred())
	step("images", start)

	start = time.Now()
	inst, err := c.Install(ctx, cluster.InstallOptions{Root: c.Root, Kubectl: c.Kubectl, Image: image, Log: testWriter{t}})
	g.Expect(err).NotTo(HaveOccurred())
	step("install", start)

	// A Stack from Git on loopback, state on the controller's volume.
	git := testenv.NewGitServer(t)
	git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": program("blue", false)}, "first")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}
	g.Expect(k.Create(ctx, ns)).To(Succeed())
	g.Expect(k.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pulumi-passphrase", Namespace: ns.Name},
		StringData: map[string]string{"passphrase": passphrase},
	})).To(Succeed())
	// The controller runs Pulumi as itself; like a user, let it manage the
	// namespace its program writes to (the provider also watches a
	// Deployment's ReplicaSets, Pods and claims until it is ready).
	g.Expect(k.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "stackpilot-edit", Namespace: ns.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: cluster.DeploymentName, Namespace: cluster.SystemNamespace}},
	})).To(Succeed())
	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns.Name},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{
				Git: &v1alpha1.GitSource{URL: git.URL("infra"), Ref: &v1alpha1.GitRef{Branch: "main"}},
				Dir: "app",
			},
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: "pulumi-passphrase"}},
			Config: map[string]apiextensionsv1.JSON{
				"namespace":                         {Raw: []byte(`"infra"`)},
				"image":                             {Raw: []byte(fmt.Sprintf("%q", c.Registry+"/"+cluster.PauseRepository+":"+cluster.PauseTag))},
				"kubernetes:enableConfigMapMutable": {Raw: []byte(`true`)},
			},
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
	start = time.Now()
	g.Expect(k.Create(ctx, stack)).To(Succeed())
	waitReady(t, k, c, client.ObjectKeyFromObject(stack), "")
	step("first-stack-ready", start)
	var cm corev1.ConfigMap
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "app-settings"}, &cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("color", "blue"))

	// `stackpilot dashboard` through a port-forward to the controller's Pod.
	start = time.Now()
	testDashboardCLI(t, c, cli(), client.ObjectKeyFromObject(stack))
	step("dashboard-cli", start)

	// A new revision whose `pulumi up` takes a while; delete the controller's
	// Pod while it runs. The Deployment's next Pod picks the operation up.
	commit := git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": program("green", true)}, "slow")
	start = time.Now()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, start.Format(time.RFC3339Nano))
	g.Expect(k.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	if !g.Eventually(func() error {
		return k.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "slow"}, &appsv1.Deployment{})
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed(), "the operation of the second revision never started") {
		t.Fatalf("Stack: %s", stackStatus(k, client.ObjectKeyFromObject(stack)))
	}
	old := controllerPod(g, k)
	t.Logf("deleting controller Pod %s in the middle of `pulumi up` (%s after the commit)", old.Name, time.Since(start).Round(time.Second))
	g.Expect(k.Delete(ctx, old)).To(Succeed())
	waitReady(t, k, c, client.ObjectKeyFromObject(stack), commit)
	step("ready-after-pod-deleted", start)
	g.Expect(controllerPod(g, k).Name).NotTo(Equal(old.Name))
	// The deleted Pod's operation is in the history, not silently dropped.
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	var outcomes []string
	for _, h := range stack.Status.History {
		outcomes = append(outcomes, fmt.Sprintf("%s %s %s", h.Type, h.Revision, h.Outcome))
	}
	t.Logf("history: %s", strings.Join(outcomes, "; "))
	g.Expect(outcomes).To(ContainElement(MatchRegexp(`up .*%s (interrupted|cancelled)$`, commit)),
		"the operation of the deleted Pod is not in the history")
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "app-settings"}, &cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("color", "green"))
	var slow appsv1.Deployment
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "slow"}, &slow)).To(Succeed())
	g.Expect(slow.Status.AvailableReplicas).To(BeEquivalentTo(1))

	// Least privilege: the API server never refused the controller (its audit
	// log has every request), and its log says no different.
	// First, that a refusal does show: list Nodes as a ServiceAccount that may not.
	probe := "system:serviceaccount:" + cluster.SystemNamespace + ":audit-probe"
	cfg, err := c.RESTConfig()
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Impersonate.UserName = probe
	probeClient, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsForbidden(probeClient.List(ctx, &corev1.NodeList{}))).To(BeTrue())
	g.Expect(c.Denied(probe)).To(ContainElement(HavePrefix("list nodes")))
	denied, err := c.Denied("system:serviceaccount:" + cluster.SystemNamespace + ":" + cluster.DeploymentName)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(denied).To(BeEmpty(), "the controller needed permissions the manifests do not grant")
	logs := controllerLogs(c)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the controller needed a permission the manifests do not grant:\n%s", line)
		}
	}

	// Uninstall: Stacks first (their finalizer is the controller's), then the
	// manifests; nothing of Stackpilot is left.
	start = time.Now()
	g.Expect(k.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(stack), &v1alpha1.Stack{}))
	}, 2*time.Minute, time.Second).Should(BeTrue(), "the Stack's finalizer was not removed")
	g.Expect(c.Uninstall(ctx, c.Kubectl, inst)).To(Succeed())
	step("uninstall", start)
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: cluster.SystemNamespace}, &corev1.Namespace{}))).To(BeTrue(), "namespace left")
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "stacks.stackpilot.dev"}, &apiextensionsv1.CustomResourceDefinition{}))).To(BeTrue(), "CRD left")
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "stackpilot-data"}, &corev1.PersistentVolume{}))).To(BeTrue(), "PersistentVolume left")
	part := client.MatchingLabels{"app.kubernetes.io/part-of": "stackpilot"}
	var roles rbacv1.ClusterRoleList
	g.Expect(k.List(ctx, &roles, part)).To(Succeed())
	g.Expect(roles.Items).To(BeEmpty(), "ClusterRoles left")
	var bindings rbacv1.ClusterRoleBindingList
	g.Expect(k.List(ctx, &bindings, part)).To(Succeed())
	g.Expect(bindings.Items).To(BeEmpty(), "ClusterRoleBindings left")

	// The Helm chart, in the same cluster with the same image and Git server.
	testHelm(t, c, image, git, timings)
}

// waitReady waits until the Stack is Ready (at revision, unless "").
func waitReady(t *testing.T, k client.Client, c *testenv.Cluster, key client.ObjectKey, revision string) {
	t.Helper()
	g := NewWithT(t)
	var last string
	ok := g.Eventually(func(g Gomega) {
		s := &v1alpha1.Stack{}
		g.Expect(k.Get(context.Background(), key, s)).To(Succeed())
		ready := conditions.Get(s, v1alpha1.ReadyCondition)
		last = "<no Ready condition>"
		if ready != nil {
			last = fmt.Sprintf("%s/%s: %s (revision %s)", ready.Status, ready.Reason, ready.Message, s.Status.LastAppliedRevision)
		}
		g.Expect(conditions.IsReady(s)).To(BeTrue(), last)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		if revision != "" {
			g.Expect(s.Status.LastAppliedRevision).To(HaveSuffix(revision))
		}
	}, 6*time.Minute, time.Second).Should(Succeed())
	if !ok {
		t.Fatalf("Stack %s not Ready: %s\n%s\ncontroller pods: %s\ncontroller log:\n%s", key, last,
			stackStatus(k, key), c.PodsSummary(context.Background(), cluster.SystemNamespace), cluster.Tail(controllerLogs(c), 60))
	}
}

func controllerPod(g Gomega, k client.Client) *corev1.Pod {
	var pods corev1.PodList
	g.Expect(k.List(context.Background(), &pods, client.InNamespace(cluster.SystemNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": cluster.DeploymentName})).To(Succeed())
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	g.Expect(pods.Items).NotTo(BeEmpty(), "no controller Pod")
	return &pods.Items[0]
}

// controllerLogs is every controller container's log (all Pods, all restarts).
func controllerLogs(c *testenv.Cluster) string {
	return c.ContainerLogs(cluster.SystemNamespace, "manager")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// stackStatus is the Stack's status as YAML-ish JSON, for failure messages.
func stackStatus(k client.Client, key client.ObjectKey) string {
	s := &v1alpha1.Stack{}
	if err := k.Get(context.Background(), key, s); err != nil {
		return err.Error()
	}
	data, _ := json.MarshalIndent(s.Status, "", "  ")
	return string(data)
}
