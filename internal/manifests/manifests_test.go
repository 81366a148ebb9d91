package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestRenderedIsUpToDate renders config/default as `make manifests` does
// and compares: an edit under config/ without `make manifests` fails here,
// not in a user's install.
func TestRenderedIsUpToDate(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("no bin/kubectl (run `make tools`): %v", err)
	}
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(root, "config", "default"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, stderr.String())
	}
	if !bytes.Equal(Rendered, want) {
		t.Fatalf("internal/manifests/stackpilot.yaml is not config/default rendered: run `make manifests` and commit it")
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the manifests", kind, name)
	return nil
}

func TestObjectsDefault(t *testing.T) {
	objs, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	if kinds["CustomResourceDefinition"] != 5 || kinds["Namespace"] != 1 || kinds["Deployment"] != 1 {
		t.Fatalf("kinds %v: want 5 CRDs (Stack, Alert, Receiver, StackPolicy, ClusterStackPolicy), 1 Namespace, 1 Deployment", kinds)
	}
	d := find(t, objs, "Deployment", DeploymentName)
	if d.GetNamespace() != DefaultNamespace {
		t.Errorf("Deployment in %q", d.GetNamespace())
	}
	find(t, objs, "Namespace", DefaultNamespace)
	find(t, objs, "ClusterRole", ClusterRoleName)
}

func TestObjectsNamespaceAndImage(t *testing.T) {
	objs, err := Objects(Options{Namespace: "ops", Image: "registry.example/sp:v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, DefaultNamespace) || strings.Contains(s, "stackpilot-controller:latest") {
		t.Fatalf("the output still names %s or the default image:\n%s", DefaultNamespace, s)
	}
	find(t, objs, "Namespace", "ops")
	for _, o := range objs {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" || strings.HasPrefix(o.GetKind(), "Cluster") {
			if o.GetNamespace() != "" {
				t.Errorf("cluster-scoped %s %s got namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
			}
			continue
		}
		if o.GetNamespace() != "ops" {
			t.Errorf("%s %s in %q, want ops", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	b := find(t, objs, "ClusterRoleBinding", "stackpilot-manager-rolebinding")
	subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	if ns := subjects[0].(map[string]any)["namespace"]; ns != "ops" {
		t.Errorf("ClusterRoleBinding subject in %v, want ops", ns)
	}
	d := find(t, objs, "Deployment", DeploymentName)
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if img := containers[0].(map[string]any)["image"]; img != "registry.example/sp:v1.2.3" {
		t.Errorf("image %v", img)
	}
	// The embedded objects are not changed: every call starts afresh.
	again, _ := Objects(Options{})
	find(t, again, "Namespace", DefaultNamespace)
}

// TestInputsDigestDescription: the CRD users install describes
// status.inputsDigest as what the controller writes, a keyed HMAC
// (internal/inputs' digestPrefix), not a plain hash anyone could
// recompute.
func TestInputsDigestDescription(t *testing.T) {
	objs, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	crd := find(t, objs, "CustomResourceDefinition", "stacks.stackpilot.dev")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		desc, _, _ := unstructured.NestedString(v.(map[string]any),
			"schema", "openAPIV3Schema", "properties", "status", "properties", "inputsDigest", "description")
		if !strings.Contains(desc, `"hmac-sha256:<hex>"`) || strings.Contains(desc, `("sha256:`) {
			t.Errorf("status.inputsDigest is described as %q: say hmac-sha256 (edit api/v1alpha1/stack_types.go, run `make manifests`)", desc)
		}
	}
}

// TestObjectsLocalIsConfigLocal: `stackpilot install --executor=Local`
// installs what config/local declares, object for object: the manager's
// default executor Local and Stack writes not aggregated into edit and
// admin, while the default (Job) aggregates them.
func TestObjectsLocalIsConfigLocal(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("no bin/kubectl (run `make tools`): %v", err)
	}
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(root, "config", "local"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/local: %v\n%s", err, stderr.String())
	}
	want, err := decode(rendered)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Objects(Options{Executor: "Local"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d objects, config/local has %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].Object, want[i].Object) {
			g, _ := YAML(got[i : i+1])
			w, _ := YAML(want[i : i+1])
			t.Fatalf("%s %s differs from config/local's:\n%s\nwant:\n%s", want[i].GetKind(), want[i].GetName(), g, w)
		}
	}
	args := func(objs []*unstructured.Unstructured) []any {
		c, _, _ := unstructured.NestedSlice(find(t, objs, "Deployment", DeploymentName).Object, "spec", "template", "spec", "containers")
		return c[0].(map[string]any)["args"].([]any)
	}
	if a := args(got); !slices.Contains(a, any("--default-executor=Local")) || slices.Contains(a, any("--default-executor=Job")) {
		t.Errorf("Local's args: %v", a)
	}
	if l := find(t, got, "ClusterRole", StackEditorRoleName).GetLabels(); l["rbac.authorization.k8s.io/aggregate-to-edit"] != "" {
		t.Errorf("Local aggregates Stack writes into edit: %v", l)
	}
	dflt, err := Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a := args(dflt); !slices.Contains(a, any("--default-executor=Job")) || !slices.Contains(a, any("--default-service-account="+RunnerServiceAccount)) {
		t.Errorf("the default's args: %v", a)
	}
	if l := find(t, dflt, "ClusterRole", StackEditorRoleName).GetLabels(); l["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" || l["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" {
		t.Errorf("the default (Job) does not aggregate Stack writes into edit and admin: %v", l)
	}
	if _, err := Objects(Options{Executor: "Pod"}); err == nil {
		t.Error("executor Pod accepted")
	}
}
