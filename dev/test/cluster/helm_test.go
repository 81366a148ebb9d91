package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/dev/internal/controllerproc"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/daemon"
)

const release = "stackpilot"

// testHelm installs the Helm chart (charts/stackpilot) into the cluster
// TestInstall used, after its kustomize install is gone, with the same image
// and Git server: `helm template | kubectl apply --server-side` is accepted;
// `helm install` scoped to namespace infra (rbac.scope namespaces: no
// cluster-wide grant of the controller's namespaced rights) runs a Stack
// there to Ready, refused nothing; `helm upgrade` with other resources and a
// shard rolls out, the new Pod serves the Stack and the shard's Pod a Stack
// labelled for it (testHelmShard); `helm uninstall` removes all of it but
// the CRDs, which Helm keeps. It leaves the cluster as it found it.
func testHelm(t *testing.T, c *testenv.Cluster, image string, git *testenv.GitServer, timings map[string]time.Duration) {
	g := NewWithT(t)
	ctx := context.Background()
	k := c.Client
	helm := filepath.Join(c.BinDir, "helm")
	chart := filepath.Join(c.Root, "charts", "stackpilot")
	ns := cluster.SystemNamespace
	step := func(name string, start time.Time) { timings[name] = time.Since(start).Round(100 * time.Millisecond) }

	// helm template | kubectl apply --server-side: every object is accepted
	// (the chart's Namespace too), then deleted again for helm install. No
	// Pod: this cluster's specifics come with helm install below, and a
	// controller losing its RBAC to the delete would be refused, which the
	// audit check there counts.
	start := time.Now()
	rendered := run(t, helm, nil, "template", release, chart, "--namespace", ns, "--include-crds",
		"--set", "createNamespace=true", "--set", "replicas=0")
	run(t, c.Kubectl, rendered, "--kubeconfig", c.Kubeconfig, "apply", "--server-side", "-f", "-")
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.DeploymentName}, &appsv1.Deployment{})).To(Succeed())
	// A CRD deleted the moment it is created can hang in Terminating: the
	// API server's cleanup finalizer lists its instances and backs off
	// while the new kind's storage is still starting. Delete once each
	// kind is served, as anyone would who created them to use them.
	waitCRDsServed(t, c)
	deleteExplained(t, c, rendered, "-f", "-")
	step("helm-template-apply", start)

	// helm install. The namespace exists first (Helm keeps the release
	// there) and allows host networking; the post-renderer layers this
	// cluster's specifics (config/cluster) on the chart.
	controllerUser := "system:serviceaccount:" + ns + ":" + cluster.DeploymentName
	// What was refused before (the controller of the uninstall above, whose
	// RBAC went first): the chart's install must add nothing.
	deniedBefore, err := c.Denied(controllerUser)
	g.Expect(err).NotTo(HaveOccurred())
	start = time.Now()
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}})).To(Succeed())
	repo, digest, _ := strings.Cut(image, "@")
	postRenderer, mainMetrics, shardMetrics := writePostRenderer(t, c)
	install := []string{"--kubeconfig", c.Kubeconfig, "--namespace", ns, "--wait", "--timeout", "5m",
		"--post-renderer", postRenderer, "--set", "image.repository=" + repo, "--set", "image.digest=" + digest,
		"--set", "executor=Local", "--set", "rbac.scope=namespaces", "--set", "watchNamespaces={infra}"}
	out := run(t, helm, nil, append([]string{"install", release, chart}, install...)...)
	t.Logf("helm install:\n%s", out)
	step("helm-install", start)
	var bindings rbacv1.ClusterRoleBindingList
	g.Expect(k.List(ctx, &bindings, client.MatchingLabels{"app.kubernetes.io/instance": release})).To(Succeed())
	for _, b := range bindings.Items {
		g.Expect(b.RoleRef.Name).NotTo(Equal("stackpilot-manager-role"), "rbac.scope namespaces bound the manager role cluster-wide")
	}

	// A Stack in the watched namespace (TestInstall's infra) becomes Ready.
	// It acts as the chart's defaultServiceAccount, stackpilot-runner, with
	// a token the controller requests for it (the tenancy lockdown): that
	// ServiceAccount may edit infra.
	g.Expect(k.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: runnerSA, Namespace: "infra"}})).To(Succeed())
	g.Expect(k.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "stackpilot-runner-edit", Namespace: "infra"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: runnerSA, Namespace: "infra"}},
	})).To(Succeed())
	commit := git.Commit(t, "infra", "helm", map[string]string{
		"app/Pulumi.yaml": strings.ReplaceAll(program("blue", false), "app-settings", "helm-settings")}, "helm")
	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "helm", Namespace: "infra"},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{
				Git: &v1alpha1.GitSource{URL: git.URL("infra"), Ref: &v1alpha1.GitRef{Branch: "helm"}},
				Dir: "app",
			},
			SecretsProvider: &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: "pulumi-passphrase"}},
			Config: map[string]apiextensionsv1.JSON{
				"namespace": {Raw: []byte(`"infra"`)},
				"image":     {Raw: []byte(`"unused"`)},
			},
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
	start = time.Now()
	g.Expect(k.Create(ctx, stack)).To(Succeed())
	waitReady(t, k, c, client.ObjectKeyFromObject(stack), commit)
	step("helm-stack-ready", start)
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "infra", Name: "helm-settings"}, &corev1.ConfigMap{})).To(Succeed())
	denied, err := c.Denied(controllerUser)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(denied).To(Equal(deniedBefore), "the controller needed permissions the chart's namespaced RBAC does not grant")

	// helm upgrade with other resources and a shard: a new Pod, which
	// serves the Stack (a requested reconcile is handled).
	start = time.Now()
	old := controllerPod(g, k)
	out = run(t, helm, nil, append([]string{"upgrade", release, chart, "--reuse-values",
		"--set", "resources.limits.memory=1536Mi", "--set", "shards={" + helmShard + "}"}, install...)...)
	t.Logf("helm upgrade:\n%s", out)
	pod := controllerPod(g, k)
	g.Expect(pod.Name).NotTo(Equal(old.Name), "helm upgrade rolled out no new Pod")
	g.Expect(pod.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("1536Mi"))
	requested := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, requested)
	g.Expect(k.Patch(ctx, stack, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	g.Eventually(func() string {
		s := &v1alpha1.Stack{}
		_ = k.Get(ctx, client.ObjectKeyFromObject(stack), s)
		return s.Status.LastHandledReconcileAt
	}, 3*time.Minute, time.Second).Should(Equal(requested), "the upgraded controller did not serve the Stack")
	waitReady(t, k, c, client.ObjectKeyFromObject(stack), commit)
	step("helm-upgrade", start)

	start = time.Now()
	shardStack := testHelmShard(t, c, git, stack, mainMetrics, shardMetrics)
	step("helm-shard", start)

	// helm uninstall: the Stack first (its finalizer is the controller's),
	// then the release; the CRDs stay, as Helm leaves the CRDs of crds/.
	start = time.Now()
	for _, s := range []*v1alpha1.Stack{stack, shardStack} {
		g.Expect(k.Delete(ctx, s)).To(Succeed())
	}
	for _, s := range []*v1alpha1.Stack{stack, shardStack} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(s), &v1alpha1.Stack{}))
		}, 2*time.Minute, time.Second).Should(BeTrue(), "the finalizer of Stack %s was not removed", s.Name)
	}
	run(t, helm, nil, "uninstall", release, "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--wait", "--timeout", "5m")
	step("helm-uninstall", start)
	part := client.MatchingLabels{"app.kubernetes.io/part-of": "stackpilot"}
	var roles rbacv1.ClusterRoleList
	g.Expect(k.List(ctx, &roles, part)).To(Succeed())
	g.Expect(roles.Items).To(BeEmpty(), "ClusterRoles left")
	g.Expect(k.List(ctx, &bindings, part)).To(Succeed())
	g.Expect(bindings.Items).To(BeEmpty(), "ClusterRoleBindings left")
	var roleBindings rbacv1.RoleBindingList
	g.Expect(k.List(ctx, &roleBindings, part)).To(Succeed())
	g.Expect(roleBindings.Items).To(BeEmpty(), "RoleBindings left")
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.DeploymentName}, &appsv1.Deployment{}))).To(BeTrue(), "Deployment left")
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.DeploymentName + "-" + helmShard}, &appsv1.Deployment{}))).To(BeTrue(), "the shard's Deployment left")
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "stackpilot-data"}, &corev1.PersistentVolume{}))).To(BeTrue(), "PersistentVolume left")
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "stacks.stackpilot.dev"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), "helm uninstall removed the CRDs")

	// What TestInstall's uninstall leaves: no CRDs, no namespace.
	start = time.Now()
	deleteExplained(t, c, nil, "-f", filepath.Join(chart, "crds"))
	run(t, c.Kubectl, nil, "--kubeconfig", c.Kubeconfig, "delete", "--wait", "--timeout=3m", "namespace", ns)
	step("helm-cleanup", start)
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))).To(BeTrue(), "namespace left")
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "stacks.stackpilot.dev"}, &apiextensionsv1.CustomResourceDefinition{}))).To(BeTrue(), "CRD left")
}

// helmShard is the shard the chart's upgrade adds (values shards).
const helmShard = "shard1"

// testHelmShard checks the shard that helm upgrade added: its Deployment's
// Pod serves a Stack labelled for it, which becomes Ready by one up of the
// shard's controller; the main controller never reconciles it (it has no
// per-Stack series for it, not even one at 0); and the shard's replicas elect their leader
// with a Lease of their own. It returns the shard's Stack, for the
// uninstall to delete while the shard runs.
func testHelmShard(t *testing.T, c *testenv.Cluster, git *testenv.GitServer, like *v1alpha1.Stack, mainMetrics, shardMetrics string) *v1alpha1.Stack {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	k := c.Client
	name := cluster.DeploymentName + "-" + helmShard
	var d appsv1.Deployment
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: cluster.SystemNamespace, Name: name}, &d)).To(Succeed(), "helm upgrade with shards added no Deployment %s", name)
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--watch-label-selector=" + v1alpha1.ShardLabel + " in (" + helmShard + ")"))
	g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)), "helm upgrade --wait left the shard's Pod not Ready:\n%s", c.PodsSummary(ctx, cluster.SystemNamespace))

	commit := git.Commit(t, "infra", "helm-shard", map[string]string{
		"app/Pulumi.yaml": strings.ReplaceAll(program("green", false), "app-settings", "helm-shard-settings")}, "helm shard")
	stack := like.DeepCopy()
	stack.ObjectMeta = metav1.ObjectMeta{Name: "helm-shard", Namespace: like.Namespace, Labels: map[string]string{v1alpha1.ShardLabel: helmShard}}
	stack.Spec.Source.Git.Ref = &v1alpha1.GitRef{Branch: "helm-shard"}
	stack.Status = v1alpha1.StackStatus{}
	g.Expect(k.Create(ctx, stack)).To(Succeed())
	waitReady(t, k, c, client.ObjectKeyFromObject(stack), commit)
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: "helm-shard-settings"}, &corev1.ConfigMap{})).To(Succeed())

	series := fmt.Sprintf(`namespace=%q`, stack.Namespace)
	ups, err := controllerproc.Metric(shardMetrics, "stackpilot_operations_total", `type="up"`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ups).To(Equal(1.0), "the shard's controller ran no up, or more than one, for its one Stack")
	ready, err := controllerproc.Metric(shardMetrics, "stackpilot_stack_ready", series, `name="helm-shard"`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready).To(Equal(1.0), "the shard's controller has not seen its Stack Ready")
	// The main controller reconciled its own Stack, and never the shard's.
	mine, err := controllerproc.Metric(mainMetrics, "stackpilot_stack_ready", series, fmt.Sprintf(`name=%q`, like.Name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mine).To(Equal(1.0), "the main controller's metrics (%s) do not show its own Stack: the check below would prove nothing", mainMetrics)
	other, err := controllerproc.Series(mainMetrics, "stackpilot_stack_ready", series, `name="helm-shard"`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).To(BeZero(), "the main controller reconciled the shard's Stack (it has a series for it)")

	// Two Leases, two leaders. (A holder is "<hostname>_<uuid>", and on the
	// host's network every Pod's hostname is the node's: the holders tell
	// the two processes apart, not their Pods.)
	var leases coordinationv1.LeaseList
	g.Expect(k.List(ctx, &leases, client.InNamespace(cluster.SystemNamespace))).To(Succeed())
	holders := map[string]string{}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			holders[l.Name] = *l.Spec.HolderIdentity
		}
	}
	g.Expect(holders).To(HaveLen(2), "want the main controller's Lease and the shard's, each held")
	g.Expect(holders).To(HaveKey("stackpilot-controller-leader"))
	var shardHolder string
	for name, holder := range holders {
		if name != "stackpilot-controller-leader" {
			g.Expect(name).To(HavePrefix("stackpilot-controller-leader-"), "the shard's Lease")
			shardHolder = holder
		}
	}
	g.Expect(shardHolder).NotTo(Equal(holders["stackpilot-controller-leader"]), "one process holds both Leases")
	return stack
}

// writePostRenderer writes the executable `helm --post-renderer` runs: it
// layers on the chart's output what config/cluster layers on config/local
// (host network, the API server on loopback, the data on a PersistentVolume
// of this machine; strategy Recreate, as host ports cannot be shared), with
// the ports Install would choose. The Deployment of shard helmShard, when
// the chart renders one, gets the same with ports of its own (its data stay
// in the chart's emptyDir); shardMetrics is its metrics endpoint.
func writePostRenderer(t *testing.T, c *testenv.Cluster) (script, mainMetrics, shardMetrics string) {
	t.Helper()
	dir := t.TempDir()
	dataDir := filepath.Join(c.Dir, "volumes", "stackpilot-helm")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dataDir, cluster.ControllerUID, cluster.ControllerUID); err != nil {
		t.Fatal(err)
	}
	metrics, err := daemon.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	health, err := daemon.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dashboard, err := daemon.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(c.Root, "config", "cluster")
	// The JSON patch tests the args it replaces: the chart's order is
	// config/default's.
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [helm.yaml, %[1]s/data.yaml, pv.yaml]
patches:
  - path: %[1]s/manager.yaml
  - target: {kind: Deployment, name: %[2]s}
    patch: |-
      - {op: test, path: /spec/template/spec/containers/0/args/1, value: "--metrics-bind-address=:8080"}
      - {op: replace, path: /spec/template/spec/containers/0/args/1, value: "--metrics-bind-address=127.0.0.1:%[3]d"}
      - {op: test, path: /spec/template/spec/containers/0/args/2, value: "--health-probe-bind-address=:8081"}
      - {op: replace, path: /spec/template/spec/containers/0/args/2, value: "--health-probe-bind-address=127.0.0.1:%[4]d"}
      - {op: test, path: /spec/template/spec/containers/0/args/3, value: "--dashboard-bind-address=:9445"}
      - {op: replace, path: /spec/template/spec/containers/0/args/3, value: "--dashboard-bind-address=127.0.0.1:%[6]d"}
      - op: replace
        path: /spec/template/spec/containers/0/ports
        value:
          - {name: metrics, containerPort: %[3]d, protocol: TCP}
          - {name: health, containerPort: %[4]d, protocol: TCP}
          - {name: logs, containerPort: 9443, protocol: TCP}
          - {name: dashboard, containerPort: %[6]d, protocol: TCP}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: "%[5]d"}
`, config, cluster.DeploymentName, metrics, health, c.APIServerPort, dashboard) + shardPatch(t, c, &shardMetrics)
	for name, data := range map[string]string{"kustomization.yaml": kustomization, "pv.yaml": cluster.DataVolume(dataDir)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script = filepath.Join(dir, "post-render")
	body := fmt.Sprintf("#!/bin/sh\nset -e\ncat > %s/helm.yaml\nexec %s kustomize --load-restrictor=LoadRestrictionsNone %s\n", dir, c.Kubectl, dir)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, fmt.Sprintf("127.0.0.1:%d", metrics), shardMetrics
}

// shardPatch is the post-renderer's patch of shard helmShard's Deployment:
// on the host's network beside the main controller, each of its endpoints
// needs a port of its own (a later flag wins over the chart's), and it
// reaches the API server on loopback. A patch whose target is not rendered
// (before `--set shards`) changes nothing.
func shardPatch(t *testing.T, c *testenv.Cluster, metricsAddr *string) string {
	t.Helper()
	var ports [6]int
	for i := range ports {
		p, err := daemon.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	*metricsAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	return fmt.Sprintf(`  - target: {kind: Deployment, name: %[1]s-%[2]s}
    patch: |-
      - {op: add, path: /spec/strategy, value: {type: Recreate}}
      - {op: add, path: /spec/template/spec/hostNetwork, value: true}
      - {op: add, path: /spec/template/spec/dnsPolicy, value: Default}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--metrics-bind-address=127.0.0.1:%[3]d"}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--health-probe-bind-address=127.0.0.1:%[4]d"}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--dashboard-bind-address=127.0.0.1:%[5]d"}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--webhook-bind-address=127.0.0.1:%[6]d"}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--logs-bind-address=127.0.0.1:%[7]d"}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--runner-bind-address=127.0.0.1:%[8]d"}
      - op: replace
        path: /spec/template/spec/containers/0/ports
        value:
          - {name: metrics, containerPort: %[3]d, protocol: TCP}
          - {name: health, containerPort: %[4]d, protocol: TCP}
          - {name: dashboard, containerPort: %[5]d, protocol: TCP}
          - {name: webhooks, containerPort: %[6]d, protocol: TCP}
          - {name: logs, containerPort: %[7]d, protocol: TCP}
          - {name: runner, containerPort: %[8]d, protocol: TCP}
      - {op: add, path: /spec/template/spec/containers/0/livenessProbe/httpGet/host, value: 127.0.0.1}
      - {op: add, path: /spec/template/spec/containers/0/readinessProbe/httpGet/host, value: 127.0.0.1}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_PORT, value: "%[9]d"}}
`, cluster.DeploymentName, helmShard, ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], c.APIServerPort)
}

// waitCRDsServed waits until every stackpilot.dev CRD is Established and
// a list of its kind is answered.
func waitCRDsServed(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var crds apiextensionsv1.CustomResourceDefinitionList
	g.Expect(c.Client.List(ctx, &crds)).To(Succeed())
	served := 0
	for _, crd := range crds.Items {
		if crd.Spec.Group != v1alpha1.GroupVersion.Group {
			continue
		}
		served++
		g.Eventually(func() error {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(&crd), &got); err != nil {
				return err
			}
			if !crdCondition(&got, apiextensionsv1.Established) {
				return fmt.Errorf("CRD %s not Established", crd.Name)
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(crd.Spec.Names.ListKind))
			return c.Client.List(ctx, list)
		}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	}
	g.Expect(served).To(BeNumerically(">", 0), "no stackpilot.dev CRD to wait for")
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, kind apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == kind {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// deleteExplained runs `kubectl delete --wait` on what args name; when it
// fails, the failure carries each stackpilot.dev CRD's conditions, as a CRD
// that does not go away says why only there.
func deleteExplained(t *testing.T, c *testenv.Cluster, stdin []byte, args ...string) {
	t.Helper()
	args = append([]string{"--kubeconfig", c.Kubeconfig, "delete", "--wait", "--timeout=3m"}, args...)
	cmd := exec.Command(c.Kubectl, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	var states strings.Builder
	if lerr := c.Client.List(context.Background(), &crds); lerr != nil {
		fmt.Fprintf(&states, "listing CRDs: %v\n", lerr)
	}
	for _, crd := range crds.Items {
		if crd.Spec.Group != v1alpha1.GroupVersion.Group {
			continue
		}
		fmt.Fprintf(&states, "%s (finalizers %v):\n", crd.Name, crd.Finalizers)
		for _, cond := range crd.Status.Conditions {
			fmt.Fprintf(&states, "  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	t.Fatalf("kubectl %s: %v\n%s\nCRDs:\n%s", strings.Join(args[2:], " "), err, cluster.Tail(string(out), 40), states.String())
}

// run runs a command with stdin and returns its stdout, failing t with its
// output on error.
func run(t *testing.T, name string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String(), cluster.Tail(stdout.String(), 40))
	}
	return stdout.Bytes()
}
