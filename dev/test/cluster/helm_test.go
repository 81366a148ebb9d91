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
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/daemon"
)

const release = "stackpilot"

// testHelm installs the Helm chart (charts/stackpilot) into the cluster
// TestInstall used, after its kustomize install is gone, with the same image
// and Git server: `helm template | kubectl apply --server-side` is accepted;
// `helm install` scoped to namespace infra (rbac.scope namespaces: no
// cluster-wide grant of the controller's namespaced rights) runs a Stack
// there to Ready, refused nothing; `helm upgrade` with other resources rolls
// out and the new Pod serves the Stack; `helm uninstall` removes all of it
// but the CRDs, which Helm keeps. It leaves the cluster as it found it.
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
	postRenderer := writePostRenderer(t, c)
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

	// helm upgrade with other resources: a new Pod, which serves the Stack
	// (a requested reconcile is handled).
	start = time.Now()
	old := controllerPod(g, k)
	out = run(t, helm, nil, append([]string{"upgrade", release, chart, "--reuse-values",
		"--set", "resources.limits.memory=1536Mi"}, install...)...)
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

	// helm uninstall: the Stack first (its finalizer is the controller's),
	// then the release; the CRDs stay, as Helm leaves the CRDs of crds/.
	start = time.Now()
	g.Expect(k.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(stack), &v1alpha1.Stack{}))
	}, 2*time.Minute, time.Second).Should(BeTrue(), "the Stack's finalizer was not removed")
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

// writePostRenderer writes the executable `helm --post-renderer` runs: it
// layers on the chart's output what config/cluster layers on config/local
// (host network, the API server on loopback, the data on a PersistentVolume
// of this machine; strategy Recreate, as host ports cannot be shared), with
// the ports Install would choose.
func writePostRenderer(t *testing.T, c *testenv.Cluster) string {
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
`, config, cluster.DeploymentName, metrics, health, c.APIServerPort, dashboard)
	for name, data := range map[string]string{"kustomization.yaml": kustomization, "pv.yaml": cluster.DataVolume(dataDir)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "post-render")
	body := fmt.Sprintf("#!/bin/sh\nset -e\ncat > %s/helm.yaml\nexec %s kustomize --load-restrictor=LoadRestrictionsNone %s\n", dir, c.Kubectl, dir)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
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
