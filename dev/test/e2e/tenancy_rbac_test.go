package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/controlplane"
)

// The installed RBAC, applied by `stackpilot install` to a control plane of
// its own that runs the ClusterRole aggregation controller (the shared one
// does not, so its built-in edit, admin and view roles stay empty): what a
// namespace's editors, admins and viewers may do with Stacks, and what the
// controller's ServiceAccount may do.

// rbacControlPlane is a bare control plane that aggregates ClusterRoles, with
// Stackpilot installed (the controller's Deployment never runs: no kubelet).
func rbacControlPlane(t *testing.T, installArgs ...string) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	cp, err := controlplane.Start(context.Background(), controlplane.Options{
		BinDir:      env.BinDir,
		Controllers: append([]string{"clusterrole-aggregation-controller"}, controlplane.DefaultControllers...),
	})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cl, err := client.New(cp.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := adminCLI(t, cp.Kubeconfig, "", append([]string{"install", "--image", "registry.example/stackpilot-controller:v9.9.9", "--wait=false"}, installArgs...)...)
	if code != 0 {
		t.Fatalf("stackpilot install: exit %d\n%s", code, errOut)
	}
	return cp, cl
}

// may asks the API server (a SubjectAccessReview) whether user, in groups,
// may verb resource.group in namespace ns.
func may(g Gomega, cl client.Client, user string, groups []string, ns, group, resource, verb string) bool {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb},
	}}
	g.Expect(cl.Create(context.Background(), sar)).To(Succeed())
	return sar.Status.Allowed
}

// bindUser binds user to ClusterRole role in namespace ns.
func bindUser(g Gomega, cl client.Client, ns, user, role string) {
	g.Expect(cl.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
}

// waitAggregated waits until the aggregation controller has folded every
// ClusterRole that exists now into edit, admin and view: it creates one
// more, labelled for all three, after them, and waits until its rule shows
// in each (the controller reads the labelled roles from one informer, in
// order, so an earlier one is in by then).
func waitAggregated(t *testing.T, cl client.Client, users map[string]string) {
	t.Helper()
	g := NewWithT(t)
	name := fmt.Sprintf("e2e-aggregation-probe-%d", time.Now().UnixNano())
	probe := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-admin": "true",
			"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
			"rbac.authorization.k8s.io/aggregate-to-view":  "true",
		}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"probe.e2e.stackpilot.dev"}, Resources: []string{name}, Verbs: []string{"get"}}},
	}
	g.Expect(cl.Create(context.Background(), probe)).To(Succeed())
	for user, ns := range users {
		g.Eventually(func(g Gomega) bool {
			return may(g, cl, user, nil, ns, "probe.e2e.stackpilot.dev", name, "get")
		}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "ClusterRole aggregation did not reach %s", user)
	}
}

// asUser is a client of cp acting as user (kubectl's --as).
func asUser(t *testing.T, cp *controlplane.ControlPlane, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cl, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestTenancyNamespaceRolesCannotWriteStacks (issue 21, item 0; issue 23,
// item 8): with the Local executor a program can act as the controller, so
// whoever may write a Stack holds the controller's rights, and the Local
// install (--executor=Local) must not fold Stack writes into the built-in
// edit and admin roles: a namespace's editor or admin may read Stacks (the
// viewer rights stay) but not create, update, patch or delete them; the
// explicit editor role still grants them; and `stackpilot check` says who
// holds the controller's rights, names the Stacks of other namespaces the
// controller serves, and fails, naming the role to fix, when a ClusterRole
// folds Stack writes into edit.
func TestTenancyNamespaceRolesCannotWriteStacks(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cp, cl := rbacControlPlane(t, "--executor=Local")
	ns := "team-a"
	g.Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	bindUser(g, cl, ns, "alice", "edit")
	bindUser(g, cl, ns, "bob", "admin")
	bindUser(g, cl, ns, "carol", "view")
	bindUser(g, cl, ns, "dave", "stackpilot-stack-editor-role")
	waitAggregated(t, cl, map[string]string{"alice": ns, "bob": ns, "carol": ns})

	for _, user := range []string{"alice", "bob", "carol"} {
		for _, verb := range []string{"get", "list", "watch"} {
			g.Expect(may(g, cl, user, nil, ns, v1alpha1.GroupVersion.Group, "stacks", verb)).To(BeTrue(), "%s may not %s stacks", user, verb)
		}
		g.Expect(may(g, cl, user, nil, ns, v1alpha1.GroupVersion.Group, "stacks/status", "get")).To(BeTrue(), "%s may not get stacks/status", user)
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			g.Expect(may(g, cl, user, nil, ns, v1alpha1.GroupVersion.Group, "stacks", verb)).To(BeFalse(),
				"%s (a namespace %s) may %s Stacks, and so act as the controller", user, map[string]string{"alice": "editor", "bob": "admin", "carol": "viewer"}[user], verb)
		}
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		g.Expect(may(g, cl, "dave", nil, ns, v1alpha1.GroupVersion.Group, "stacks", verb)).To(BeTrue(), "the explicit editor role does not grant %s", verb)
	}

	// The same through real requests, as alice.
	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{
			Git: &v1alpha1.GitSource{URL: "https://git.example/web.git", Ref: &v1alpha1.GitRef{Branch: "main"}}}},
	}
	alice := asUser(t, cp, "alice")
	err := alice.Create(ctx, stack.DeepCopy())
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "alice created a Stack: %v", err)
	g.Expect(asUser(t, cp, "dave").Create(ctx, stack.DeepCopy())).To(Succeed())
	var list v1alpha1.StackList
	g.Expect(alice.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	err = alice.Patch(ctx, &list.Items[0], client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"serviceAccountName":"x"}}`)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "alice patched a Stack: %v", err)

	// check: one warning says who holds the controller's rights, one names
	// the Stack of another namespace that runs inside the controller, with
	// the fix; nothing fails about roles.
	setDeploymentReady(g, cl, true)
	out, errOut, code := adminCLI(t, cp.Kubeconfig, "", "check")
	g.Expect(code).To(Equal(0), out+errOut)
	g.Expect(out).To(ContainSubstring("whoever may create, update or patch a Stack holds the controller's rights"))
	g.Expect(out).To(ContainSubstring("⚠ the controller runs 1 Stack(s) outside its namespace stackpilot-system with the Local executor, inside the controller: team-a/web; " +
		"whoever may write them can act as the controller. Run them as Jobs: reinstall with the Job executor (`stackpilot install`"))
	g.Expect(out).To(ContainSubstring("✔ no built-in namespace role (admin, edit, view) lets its holders write Stacks"))

	// A ClusterRole that folds Stack writes into edit and admin again (what
	// the Job install's editor role does): check fails once, naming it, the
	// roles it reaches (admin also through edit) and the labels to remove.
	var editor rbacv1.ClusterRole
	g.Expect(cl.Get(ctx, client.ObjectKey{Name: "stackpilot-stack-editor-role"}, &editor)).To(Succeed())
	editor.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] = "true"
	editor.Labels["rbac.authorization.k8s.io/aggregate-to-admin"] = "true"
	g.Expect(cl.Update(ctx, &editor)).To(Succeed())
	for _, user := range []string{"alice", "bob"} {
		g.Eventually(func(g Gomega) bool {
			return may(g, cl, user, nil, ns, v1alpha1.GroupVersion.Group, "stacks", "create")
		}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue())
	}
	out, errOut, code = adminCLI(t, cp.Kubeconfig, "", "check")
	g.Expect(code).To(Equal(1), out+errOut)
	g.Expect(out).To(ContainSubstring("✗ ClusterRole stackpilot-stack-editor-role lets every namespace admin and editor create, update, patch Stacks, " +
		"and so act as the controller (it is aggregated into admin, edit): remove its labels rbac.authorization.k8s.io/aggregate-to-admin and rbac.authorization.k8s.io/aggregate-to-edit " +
		"(`kubectl label clusterrole stackpilot-stack-editor-role rbac.authorization.k8s.io/aggregate-to-admin- rbac.authorization.k8s.io/aggregate-to-edit-`)"))
	g.Expect(errOut).To(ContainSubstring("stackpilot: 1 check(s) failed"))
}

// TestTenancyJobInstallLetsEditorsWriteStacks (issue 23, item 8): the
// default install runs every operation as a Job acting as the Stack's
// ServiceAccount, so a Stack writer holds only what the namespace's
// ServiceAccounts hold: Stack writes are aggregated into edit and admin (not
// view), check passes with them, and names a Stack that asks for Local
// outside the controller's namespace (the controller refuses it).
func TestTenancyJobInstallLetsEditorsWriteStacks(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cp, cl := rbacControlPlane(t)
	ns := "team-j"
	g.Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	bindUser(g, cl, ns, "erin", "edit")
	bindUser(g, cl, ns, "frank", "admin")
	bindUser(g, cl, ns, "grace", "view")
	waitAggregated(t, cl, map[string]string{"erin": ns, "frank": ns, "grace": ns})
	for _, user := range []string{"erin", "frank"} {
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			g.Expect(may(g, cl, user, nil, ns, v1alpha1.GroupVersion.Group, "stacks", verb)).To(BeTrue(), "%s may not %s Stacks", user, verb)
		}
	}
	g.Expect(may(g, cl, "grace", nil, ns, v1alpha1.GroupVersion.Group, "stacks", "create")).To(BeFalse(), "a viewer may create Stacks")
	g.Expect(may(g, cl, "grace", nil, ns, v1alpha1.GroupVersion.Group, "stacks", "get")).To(BeTrue())

	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inside"},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://git.example/web.git", Ref: &v1alpha1.GitRef{Branch: "main"}}},
			Runner: &v1alpha1.RunnerSpec{Executor: v1alpha1.ExecutorLocal},
		},
	}
	g.Expect(asUser(t, cp, "erin").Create(ctx, stack)).To(Succeed(), "an editor writes Stacks")
	setDeploymentReady(g, cl, true)
	out, errOut, code := adminCLI(t, cp.Kubeconfig, "", "check")
	g.Expect(code).To(Equal(0), out+errOut)
	g.Expect(out).To(ContainSubstring("✔ the controller runs each operation as a Job (--default-executor=Job): a Stack writer acts only as the Stack's ServiceAccount"))
	g.Expect(out).To(ContainSubstring("⚠ 1 Stack(s) outside namespace stackpilot-system ask for the Local executor (spec.runner.executor: Local): team-j/inside; " +
		"the controller refuses them (LocalExecutorNotAllowed) unless it runs with --allow-local-executor. Remove their spec.runner.executor to run them as Jobs"))
	g.Expect(out).NotTo(ContainSubstring("whoever may create, update or patch a Stack holds"))
	g.Expect(out).NotTo(ContainSubstring("✗"))
}

// TestTenancyControllerRBACIsLeast (issue 21, item 11): the installed
// ClusterRole grants the controller no delete on ConfigMaps (nothing of it
// deletes them: the garbage collector removes the outputs objects with their
// Stack) and no patch (it creates and updates them); Secrets it may also
// patch and delete, for the Job executor's per-operation Secret (issue 23);
// its digest key Secret is granted by a Role in its own namespace. And the real
// controller, acting with exactly the installed rights, runs a Stack to
// Ready, publishes its outputs, creates its digest key and is never refused.
func TestTenancyControllerRBACIsLeast(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cp, cl := rbacControlPlane(t)
	const sysNS = "stackpilot-system"
	user := "system:serviceaccount:" + sysNS + ":stackpilot-controller"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + sysNS, "system:authenticated"}
	for _, ns := range []string{"", "team-b", sysNS} {
		for _, verb := range []string{"delete", "deletecollection", "patch"} {
			g.Expect(may(g, cl, user, groups, ns, "", "configmaps", verb)).To(BeFalse(), "the controller may %s configmaps in namespace %q", verb, ns)
		}
		g.Expect(may(g, cl, user, groups, ns, "", "secrets", "deletecollection")).To(BeFalse(), "the controller may deletecollection secrets in namespace %q", ns)
	}
	for _, verb := range []string{"patch", "delete"} {
		g.Expect(may(g, cl, user, groups, "team-b", "", "secrets", verb)).To(BeTrue(), "the Job executor may not %s its per-operation Secret", verb)
	}
	for _, res := range []string{"secrets", "configmaps"} {
		for _, verb := range []string{"get", "list", "watch", "create", "update"} {
			g.Expect(may(g, cl, user, groups, "team-b", "", res, verb)).To(BeTrue(), "the controller may not %s %s", verb, res)
		}
	}
	// The digest key: a Role in the controller's namespace names it.
	var roles rbacv1.RoleList
	g.Expect(cl.List(ctx, &roles, client.InNamespace(sysNS))).To(Succeed())
	var digestRole *rbacv1.Role
	for i, r := range roles.Items {
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				if res == "secrets" {
					digestRole = &roles.Items[i]
				}
			}
		}
	}
	g.Expect(digestRole).NotTo(BeNil(), "no Role in %s grants the digest key Secret", sysNS)
	g.Expect(digestRole.Rules).To(ContainElement(And(
		HaveField("Resources", ConsistOf("secrets")), HaveField("ResourceNames", ConsistOf("stackpilot-digest-key")), HaveField("Verbs", ContainElement("get")))))

	// The real controller, as its ServiceAccount (impersonated: the
	// installed rights, nothing else), runs a Stack whose program acts as a
	// ServiceAccount of the Stack's namespace.
	ns := "team-b"
	g.Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "deployer"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pulumi-passphrase"}, StringData: map[string]string{"passphrase": passphrase}},
	} {
		g.Expect(cl.Create(ctx, obj)).To(Succeed())
	}
	git := testenv.NewGitServer(t)
	commit := git.Commit(t, "infra", "main", map[string]string{"app/Pulumi.yaml": bridgeProgram("")}, "first")

	kc, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range kc.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = user, groups
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())
	p, err := testenv.StartController(ctx, testenv.ControllerConfig{
		Binary: controllerBinary(t), BinDir: env.BinDir, Kubeconfig: kubeconfig, DataDir: t.TempDir(),
		Args: []string{"--watch-namespace=" + ns, "--namespace=" + sysNS},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Stop() })
	ctrl := &controllerProcess{p}

	stack := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "least"},
		Spec: v1alpha1.StackSpec{
			Source:             v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: git.URL("infra"), Ref: &v1alpha1.GitRef{Branch: "main"}}, Dir: "app"},
			ServiceAccountName: "deployer",
			SecretsProvider:    &v1alpha1.SecretsProvider{PassphraseSecretRef: &v1alpha1.SecretKeyRef{Name: "pulumi-passphrase"}},
			Config: map[string]apiextensionsv1.JSON{
				"namespace":                         {Raw: []byte(fmt.Sprintf("%q", ns))},
				"kubernetes:enableConfigMapMutable": {Raw: []byte(`true`)},
			},
			Interval:      metav1.Duration{Duration: time.Hour},
			RetryInterval: &metav1.Duration{Duration: 2 * time.Second},
			Outputs:       &v1alpha1.OutputsTarget{SecretName: "least-outputs", ConfigMapName: "least-outputs"},
		},
	}
	g.Expect(cl.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)
	g.Eventually(func(g Gomega) {
		var s v1alpha1.Stack
		g.Expect(cl.Get(ctx, key, &s)).To(Succeed())
		g.Expect(s.Status.LastAppliedRevision).To(ContainSubstring(commit))
		g.Expect(conditions.IsReady(&s)).To(BeTrue(), "Ready: %s", readyMessage(&s))
	}, 5*time.Minute, time.Second).Should(Succeed(), "controller log:\n%s", ctrl.Logs(t))
	var sec corev1.Secret
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "least-outputs"}, &sec)).To(Succeed())
	var cm corev1.ConfigMap
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "least-outputs"}, &cm)).To(Succeed())
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: sysNS, Name: "stackpilot-digest-key"}, &corev1.Secret{})).To(Succeed())

	// Deleting the Stack removes its outputs objects without the
	// controller deleting anything: the garbage collector does.
	g.Expect(cl.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "least-outputs"}, &corev1.Secret{})) &&
			apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "least-outputs"}, &corev1.ConfigMap{}))
	}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), "the outputs objects outlived their Stack")
	for _, line := range strings.Split(ctrl.Logs(t), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the controller needed a permission the manifests do not grant:\n%s", line)
		}
	}
}
