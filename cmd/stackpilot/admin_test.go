package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDefaultImage(t *testing.T) {
	for _, tc := range []struct{ version, image, err string }{
		{"v0.3.0", "ghcr.io/stackpilot/stackpilot-controller:v0.3.0", ""},
		{"v1.2.3-rc.1", "ghcr.io/stackpilot/stackpilot-controller:v1.2.3-rc.1", ""},
		{"devel+0123456789ab-dirty", "", "development build (version devel+0123456789ab-dirty)"},
		{"devel", "", "pass --image REF"},
		{"1.2.3", "", "development build"},
		// Pseudo-versions: what `go install ...@main` or a build in a Git
		// checkout stamps; no image is ever published with such a tag.
		{"v0.0.0-20261202100548-d440d69abcde", "", "development build (version v0.0.0-20261202100548-d440d69abcde)"},
		{"v0.0.0-20261202100548-d440d69abcde+dirty", "", "pass --image REF"},
		{"v1.2.4-0.20261202100548-d440d69abcde", "", "development build"},
		{"v1.3.0-rc.1.0.20261202100548-d440d69abcde", "", "development build"},
		{"v1.2.3+incompatible", "", "development build"},
		{"v1.2.3-20261202100548", "ghcr.io/stackpilot/stackpilot-controller:v1.2.3-20261202100548", ""},
	} {
		image, err := defaultImage(tc.version)
		if image != tc.image || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("defaultImage(%q) = %q, %v; want %q, error with %q", tc.version, image, err, tc.image, tc.err)
		}
	}
}

func TestImageVersion(t *testing.T) {
	for ref, want := range map[string]string{
		"ghcr.io/stackpilot/stackpilot-controller:v0.3.0": "v0.3.0",
		"127.0.0.1:5000/stackpilot-controller":            "latest",
		"127.0.0.1:5000/stackpilot-controller:abc":        "abc",
		"registry.example/sp@sha256:0123":                 "sha256:0123",
		"registry.example/sp:v1@sha256:0123":              "sha256:0123",
		"stackpilot-controller":                           "latest",
	} {
		if got := imageVersion(ref); got != want {
			t.Errorf("imageVersion(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestDeploymentState(t *testing.T) {
	two := int32(2)
	d := func(gen, observed int64, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: &two},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, AvailableReplicas: available},
		}
	}
	for _, tc := range []struct {
		d      *appsv1.Deployment
		ready  bool
		detail string
	}{
		{d(2, 1, 2, 2), false, "has not seen its latest spec"},
		{d(2, 2, 1, 2), false, "1 of 2 replicas updated"},
		{d(2, 2, 2, 1), false, "1 of 2 replicas available"},
		{d(2, 2, 2, 2), true, "2/2 ready"},
	} {
		ready, detail := deploymentState(tc.d)
		if ready != tc.ready || !strings.Contains(detail, tc.detail) {
			t.Errorf("deploymentState(%+v) = %v, %q; want %v, %q", tc.d.Status, ready, detail, tc.ready, tc.detail)
		}
	}
}

// TestNeededPermissions reads what check asks the API server about from the
// embedded RBAC: the ClusterRole cluster-wide, the leader-election Role in
// the install namespace.
func TestNeededPermissions(t *testing.T) {
	perms, err := neededPermissions("ops")
	if err != nil {
		t.Fatal(err)
	}
	has := func(p permission) bool {
		for _, q := range perms {
			if q == p {
				return true
			}
		}
		return false
	}
	for _, p := range []permission{
		{"", "stackpilot.dev", "stacks", "watch", ""},
		{"", "stackpilot.dev", "stacks/finalizers", "update", ""},
		{"", "", "serviceaccounts/token", "create", ""},
		{"ops", "coordination.k8s.io", "leases", "update", ""},
		// The digest key Secret, by name, in the install namespace.
		{"ops", "", "secrets", "get", "stackpilot-digest-key"},
		{"ops", "", "secrets", "create", ""},
	} {
		if !has(p) {
			t.Errorf("no %+v among the %d permissions", p, len(perms))
		}
	}
	// The aggregated editor and viewer roles are for users, not the controller.
	if has(permission{"", "stackpilot.dev", "stacks", "create", ""}) {
		t.Errorf("the users' stack editor role counted as the controller's")
	}
	// Nothing of the controller deletes or patches ConfigMaps; Secrets only
	// for the Job executor's per-operation Secret.
	for _, p := range perms {
		readWrite := p.verb == "get" || p.verb == "list" || p.verb == "watch" || p.verb == "create" || p.verb == "update"
		if (p.resource == "configmaps" && !readWrite) || (p.resource == "secrets" && !readWrite && p.verb != "patch" && p.verb != "delete") {
			t.Errorf("the controller is granted %+v", p)
		}
	}
	for _, p := range []permission{
		{"", "batch", "jobs", "create", ""},
		{"", "batch", "jobs", "delete", ""},
		{"", "", "pods", "watch", ""},
		{"", "", "pods/log", "get", ""},
		{"", "", "secrets", "delete", ""},
	} {
		if !has(p) {
			t.Errorf("the Job executor's %+v is not granted", p)
		}
	}
}

// The controller's flags as its Deployment writes them, in both forms.
func TestControllerFlags(t *testing.T) {
	d := &appsv1.Deployment{}
	d.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "proxy", Args: []string{"--default-executor=Local"}},
		{Name: "manager", Command: []string{"/manager"}, Args: []string{"--leader-elect", "--default-executor", "Job", "--watch-namespace=a,b", "--allow-local-executor"}},
	}
	got := controllerFlags(d)
	want := map[string]string{"leader-elect": "true", "default-executor": "Job", "watch-namespace": "a,b", "allow-local-executor": "true"}
	if !maps.Equal(got, want) {
		t.Errorf("controllerFlags = %v, want %v", got, want)
	}
}

func TestAskUninstall(t *testing.T) {
	for _, tc := range []struct {
		stdin string
		err   string
	}{
		{"y\n", ""},
		{"YES\n", ""},
		{"yes", ""},
		{"n\n", "uninstall cancelled, nothing was deleted"},
		{"\n", "uninstall cancelled"},
		{"", "no answer on stdin, nothing was deleted: pass --yes"},
	} {
		var errOut strings.Builder
		c := &cli{stdin: strings.NewReader(tc.stdin), stderr: &errOut}
		err := c.askUninstall("Go? [y/N] ")
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("askUninstall with stdin %q: %v, want error with %q", tc.stdin, err, tc.err)
		}
		if !strings.HasPrefix(errOut.String(), "Go? [y/N] ") {
			t.Errorf("askUninstall with stdin %q printed %q, want the prompt", tc.stdin, errOut.String())
		}
	}
}

func TestAdminCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"version", "--client"}, 0, "stackpilot ", ""},
		{[]string{"install", "x"}, 2, "", "stackpilot: install takes no arguments"},
		{[]string{"install", "--export"}, 1, "", "pass --image REF"},
		{[]string{"install", "--export", "--image", "r.example/sp:v1", "-n", "ops"}, 0, "  name: ops\n", ""},
		{[]string{"check", "--controller-namespace", ""}, 2, "", "--controller-namespace must not be empty"},
		{[]string{"uninstall", "--bogus"}, 2, "", "unknown flag: --bogus"},
		{[]string{"check", "--kubeconfig", "/nonexistent/kubeconfig"}, 1, "", "stackpilot: "},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.errs) {
			t.Errorf("stackpilot %q: exit %d\nstdout %.300q\nstderr %q\nwant exit %d, stdout with %q, stderr with %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.errs)
		}
	}
	// version --client must not connect: a kubeconfig pointing nowhere gives no warning.
	code, _, stderr := runCLI(t, "version", "--client", "--kubeconfig", "/nonexistent/kubeconfig")
	if code != 0 || stderr != "" {
		t.Errorf("version --client: exit %d, stderr %q", code, stderr)
	}
}

// TestStackVerbs: the write verbs a role's rules grant on Stacks, wildcards
// included; reads and other resources are no writes.
func TestStackVerbs(t *testing.T) {
	rule := func(groups, resources, verbs []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	sp := []string{"stackpilot.dev"}
	for _, tc := range []struct {
		rules []rbacv1.PolicyRule
		want  []string
	}{
		{[]rbacv1.PolicyRule{rule(sp, []string{"stacks"}, []string{"get", "list", "watch"})}, nil},
		{[]rbacv1.PolicyRule{rule(sp, []string{"stacks/status"}, []string{"*"})}, nil},
		{[]rbacv1.PolicyRule{rule([]string{""}, []string{"*"}, []string{"*"})}, nil},
		{[]rbacv1.PolicyRule{rule(sp, []string{"stacks"}, []string{"patch", "create"})}, []string{"create", "patch"}},
		{[]rbacv1.PolicyRule{rule([]string{"*"}, []string{"*"}, []string{"*"})}, []string{"create", "update", "patch"}},
		{[]rbacv1.PolicyRule{rule(sp, []string{"*"}, []string{"update"}), rule(sp, []string{"stacks"}, []string{"create"})}, []string{"create", "update"}},
	} {
		if got := stackVerbs(tc.rules); !slices.Equal(got, tc.want) {
			t.Errorf("stackVerbs(%+v) = %v, want %v", tc.rules, got, tc.want)
		}
	}
}
