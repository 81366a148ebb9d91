package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/controlplane"
)

// bareControlPlane is a second real control plane with no Stackpilot CRDs,
// nothing installed: what a cluster looks like before `stackpilot install`.
// The shared one has the CRDs from the start, so it cannot show their
// absence.
func bareControlPlane(t *testing.T) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	cp, err := controlplane.Start(context.Background(), controlplane.Options{BinDir: env.BinDir})
	if err != nil {
		t.Fatalf("second control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cl, err := client.New(cp.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cp, cl
}

// adminCLI runs the built CLI against kubeconfig with stdin.
func adminCLI(t *testing.T, kubeconfig, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBinary(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("stackpilot %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), 0
}

// setDeploymentReady writes the controller Deployment's status as the
// Deployment controller would (none runs here, nor a kubelet): available
// replicas ready, or none.
func setDeploymentReady(g Gomega, cl client.Client, ready bool) {
	var d appsv1.Deployment
	g.Expect(cl.Get(context.Background(), client.ObjectKey{Namespace: "stackpilot-system", Name: "stackpilot-controller"}, &d)).To(Succeed())
	n := int32(0)
	if ready {
		n = 1
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n}
	g.Expect(cl.Status().Update(context.Background(), &d)).To(Succeed())
}

// TestAdminCLI walks a bare control plane through check, install --export
// applied with kubectl, check again, install over it, version and
// uninstall.
func TestAdminCLI(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cp, cl := bareControlPlane(t)
	kc := cp.Kubeconfig

	// Before an install: the prerequisites pass, the full check fails,
	// saying to install.
	out, errOut, code := adminCLI(t, kc, "", "check", "--pre")
	g.Expect(code).To(Equal(0), out+errOut)
	g.Expect(out).To(ContainSubstring("✔ Kubernetes v1."))
	g.Expect(out).To(ContainSubstring("✔ prerequisites checks passed"))
	g.Expect(out).NotTo(ContainSubstring("CRD"))

	out, errOut, code = adminCLI(t, kc, "", "check")
	g.Expect(code).To(Equal(1), out+errOut)
	for _, crd := range []string{"stacks", "receivers", "alerts"} {
		g.Expect(out).To(ContainSubstring("✗ CRD " + crd + ".stackpilot.dev not found: install Stackpilot: `stackpilot install`"))
	}
	g.Expect(out).To(ContainSubstring("✗ no controller Deployment stackpilot-system/stackpilot-controller: install Stackpilot"))
	// Nothing installed: the permissions are skipped in one line, not one
	// ✗ per resource about a ServiceAccount that does not exist.
	g.Expect(out).To(ContainSubstring("⚠ no ServiceAccount stackpilot-system/stackpilot-controller either: the controller is not installed in namespace stackpilot-system, so its permissions are not checked"))
	g.Expect(out).NotTo(ContainSubstring("may not"))
	g.Expect(errOut).To(ContainSubstring("stackpilot: 4 check(s) failed"))

	// install --export applies cleanly with kubectl.
	manifestsYAML, errOut, code := adminCLI(t, kc, "", "install", "--export", "--image", "registry.example/stackpilot-controller:v9.9.9")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(BeEmpty())
	apply := exec.Command(filepath.Join(env.BinDir, "kubectl"), "--kubeconfig", kc, "apply", "--server-side", "-f", "-")
	apply.Stdin = strings.NewReader(manifestsYAML)
	var applyErr strings.Builder
	apply.Stderr = &applyErr
	applied, err := apply.Output()
	g.Expect(err).NotTo(HaveOccurred(), applyErr.String())
	g.Expect(applyErr.String()).To(BeEmpty(), "kubectl warned")
	g.Expect(string(applied)).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/stacks.stackpilot.dev serverside-applied"))
	g.Expect(string(applied)).To(ContainSubstring("deployment.apps/stackpilot-controller serverside-applied"))
	// The Job executor is the default, runner Pods reach the controller
	// through a Service of their own, and Stacks without a ServiceAccount
	// act as their namespace's stackpilot-runner.
	g.Expect(manifestsYAML).To(ContainSubstring("- --default-executor=Job"))
	g.Expect(manifestsYAML).To(ContainSubstring("- --default-service-account=stackpilot-runner"))
	g.Expect(string(applied)).To(ContainSubstring("service/stackpilot-runner serverside-applied"))

	// Installed, the controller not running (no kubelet): only that fails.
	out, errOut, code = adminCLI(t, kc, "", "check")
	g.Expect(code).To(Equal(1), out+errOut)
	g.Expect(out).To(ContainSubstring("✔ stacks.stackpilot.dev/v1alpha1"))
	g.Expect(out).To(ContainSubstring("✗ controller stackpilot-system/stackpilot-controller (registry.example/stackpilot-controller:v9.9.9) is not ready"))
	g.Expect(out).To(MatchRegexp(`✔ ServiceAccount stackpilot-system/stackpilot-controller has the \d+ permissions the controller needs`))
	g.Expect(errOut).To(ContainSubstring("stackpilot: 1 check(s) failed"))

	setDeploymentReady(g, cl, true)
	out, errOut, code = adminCLI(t, kc, "", "check")
	g.Expect(code).To(Equal(0), out+errOut)
	g.Expect(out).To(ContainSubstring("✔ controller stackpilot-system/stackpilot-controller v9.9.9 (registry.example/stackpilot-controller:v9.9.9, 1/1 ready)"))
	g.Expect(out).To(ContainSubstring("✔ all checks passed"))
	g.Expect(out).To(ContainSubstring("✔ the controller runs each operation as a Job (--default-executor=Job): a Stack writer acts only as the Stack's ServiceAccount"))
	g.Expect(out).NotTo(ContainSubstring("whoever may create, update or patch a Stack holds"))

	out, errOut, code = adminCLI(t, kc, "", "version")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("controller v9.9.9 (registry.example/stackpilot-controller:v9.9.9, namespace stackpilot-system)"))

	// install over kubectl's apply takes the fields over: an upgrade.
	_, errOut, code = adminCLI(t, kc, "", "install", "--image", "registry.example/stackpilot-controller:v9.9.10", "--wait=false")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring("✔ CRDs established"))
	var d appsv1.Deployment
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "stackpilot-system", Name: "stackpilot-controller"}, &d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/stackpilot-controller:v9.9.10"))
	// Waiting for a controller that does not roll out ends with the fix.
	_, errOut, code = adminCLI(t, kc, "", "install", "--image", "registry.example/stackpilot-controller:v9.9.11", "--timeout", "10s")
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring("is not ready: the Deployment controller has not seen its latest spec yet; see `kubectl -n stackpilot-system describe deployment stackpilot-controller`"))

	// Stacks: one destroys its resources when deleted and has the
	// controller's finalizer, one does neither.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}
	g.Expect(cl.Create(ctx, ns)).To(Succeed())
	web := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web", Finalizers: []string{v1alpha1.StackFinalizer}},
		Spec: v1alpha1.StackSpec{
			Source:          v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://git.example/web.git", Ref: &v1alpha1.GitRef{Branch: "main"}}},
			StackName:       "prod",
			DestroyOnDelete: true,
		},
	}
	db := web.DeepCopy()
	db.Name, db.Finalizers, db.Spec.DestroyOnDelete, db.Spec.StackName = "db", nil, false, ""
	g.Expect(cl.Create(ctx, web)).To(Succeed())
	g.Expect(cl.Create(ctx, db)).To(Succeed())
	stacksLeft := func() int {
		var list v1alpha1.StackList
		err := cl.List(ctx, &list)
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return 0
		}
		g.Expect(err).NotTo(HaveOccurred())
		return len(list.Items)
	}

	// It asks, naming the Stack that destroys; "n" or no answer deletes nothing.
	_, errOut, code = adminCLI(t, kc, "n\n", "uninstall")
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring("This deletes 2 Stack(s)"))
	g.Expect(errOut).To(ContainSubstring("These 1 Stack(s) have destroyOnDelete: deleting them DESTROYS their Pulumi stack's resources:\n  infra/web (Pulumi stack prod)\n"))
	g.Expect(errOut).NotTo(ContainSubstring("infra/db"))
	g.Expect(errOut).To(ContainSubstring("Uninstall Stackpilot? [y/N] n\nstackpilot: uninstall cancelled, nothing was deleted"))
	_, errOut, code = adminCLI(t, kc, "", "uninstall")
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring("no answer on stdin, nothing was deleted: pass --yes"))
	g.Expect(stacksLeft()).To(Equal(2))

	// Without a ready controller the finalizer would never go: refused.
	setDeploymentReady(g, cl, false)
	_, errOut, code = adminCLI(t, kc, "", "uninstall", "--yes")
	g.Expect(code).To(Equal(1), errOut)
	g.Expect(errOut).To(ContainSubstring("the controller (Deployment stackpilot-system/stackpilot-controller) is not ready"))
	g.Expect(errOut).To(ContainSubstring("nothing was deleted"))
	g.Expect(stacksLeft()).To(Equal(2))

	// --yes with the controller ready: the Stacks go first, uninstall waits
	// for the finalizer (the test removes it, as the controller would once
	// it has destroyed the stack), then the rest.
	setDeploymentReady(g, cl, true)
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, code := adminCLI(t, kc, "", "uninstall", "--yes")
		done <- result{errOut, code}
	}()
	key := client.ObjectKeyFromObject(web)
	g.Eventually(func(g Gomega) {
		var s v1alpha1.Stack
		g.Expect(cl.Get(ctx, key, &s)).To(Succeed())
		g.Expect(s.DeletionTimestamp).NotTo(BeNil())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	// Still waiting: nothing else went yet.
	time.Sleep(2 * time.Second)
	g.Expect(done).NotTo(Receive())
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "stackpilot-system", Name: "stackpilot-controller"}, &d)).To(Succeed())
	g.Expect(cl.Patch(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	var r result
	g.Eventually(done, time.Minute).Should(Receive(&r))
	g.Expect(r.code).To(Equal(0), r.errOut)
	g.Expect(r.errOut).To(ContainSubstring("✔ every Stack is deleted"))
	g.Expect(r.errOut).To(ContainSubstring("✔ CustomResourceDefinition stacks.stackpilot.dev deleted"))
	g.Expect(r.errOut).To(ContainSubstring("✔ Stackpilot is uninstalled"))
	g.Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: "stackpilot-system", Name: "stackpilot-controller"}, &d))).To(BeTrue())
	crb := &unstructured.Unstructured{}
	crb.SetAPIVersion("rbac.authorization.k8s.io/v1")
	crb.SetKind("ClusterRoleBinding")
	g.Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Name: "stackpilot-manager-rolebinding"}, crb))).To(BeTrue())
	g.Eventually(func() bool {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Name: "stacks.stackpilot.dev"}, crd))
	}, time.Minute).Should(BeTrue())

	// Again: nothing left to delete is no error.
	_, errOut, code = adminCLI(t, kc, "", "uninstall", "--yes")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring("✔ Deployment stackpilot-system/stackpilot-controller already gone"))

	// Into another namespace, and out again keeping the CRDs.
	_, errOut, code = adminCLI(t, kc, "", "install", "-n", "ops", "--image", "registry.example/stackpilot-controller:v9.9.9", "--wait=false")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring("✔ Deployment ops/stackpilot-controller applied"))
	out, errOut, code = adminCLI(t, kc, "", "check", "--controller-namespace", "ops")
	g.Expect(code).To(Equal(1), out+errOut)
	g.Expect(out).To(MatchRegexp(`✔ ServiceAccount ops/stackpilot-controller has the \d+ permissions`))
	g.Expect(out).To(ContainSubstring("✗ controller ops/stackpilot-controller"))
	_, errOut, code = adminCLI(t, kc, "", "uninstall", "-n", "ops", "--yes", "--keep-crds")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(ContainSubstring("but not the CRDs (--keep-crds)"))
	g.Expect(errOut).NotTo(ContainSubstring("CustomResourceDefinition"))
	g.Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "stackpilot-controller"}, &d))).To(BeTrue())
	var list v1alpha1.StackList
	g.Expect(cl.List(ctx, &list)).To(Succeed(), "the CRDs are kept")
}
