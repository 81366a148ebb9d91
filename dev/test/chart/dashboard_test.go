package chart_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackpilot/stackpilot/internal/manifests"
)

// dashboard.ingress renders what config/dashboard-ingress adds to
// config/default, for the same host, class, annotations and TLS Secret.
func TestDashboardIngressIsConfigComponent(t *testing.T) {
	chart := helmTemplate(t, manifests.DefaultNamespace, "--show-only", "templates/dashboard-ingress.yaml",
		"--set", "dashboard.ingress.enabled=true",
		"--set", "dashboard.ingress.className=nginx",
		"--set", "dashboard.ingress.host=stackpilot.example.com",
		"--set", "dashboard.ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/backend-protocol=HTTPS",
		"--set", "dashboard.ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/affinity=cookie",
		"--set", "dashboard.ingress.tls[0].secretName=stackpilot-dashboard-tls",
		"--set", "dashboard.ingress.tls[0].hosts[0]=stackpilot.example.com")
	// The component as its comment says to use it: beside config/default
	// in a kustomization of one's own.
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(root(t), "config"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources: [" + rel + "/default]\ncomponents: [" + rel + "/dashboard-ingress]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	var want []*unstructured.Unstructured
	for _, o := range decode(t, run(t, "kubectl", "kustomize", dir)) {
		if o.GetKind() == "Ingress" {
			want = append(want, o)
		}
	}
	if len(want) != 1 {
		t.Fatalf("config/dashboard-ingress adds %d Ingresses, want 1", len(want))
	}
	compare(t, chart, want)
}

// dashboard.enabled=false: no flag, no container port, no Service port, no
// Ingress; the controller's default (0) leaves the dashboard off.
func TestDashboardDisabled(t *testing.T) {
	objs := helmTemplate(t, manifests.DefaultNamespace, "--set", "dashboard.enabled=false", "--set", "dashboard.ingress.enabled=true")
	for _, a := range managerArgs(t, objs, "stackpilot-controller") {
		if strings.HasPrefix(a, "--dashboard-bind-address") {
			t.Errorf("the manager's args have %s", a)
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Ingress" {
			t.Errorf("dashboard.enabled=false renders %s", key(o))
		}
		var ports []any
		switch o.GetKind() {
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			ports, _, _ = unstructured.NestedSlice(containers[0].(map[string]any), "ports")
		case "Service":
			ports, _, _ = unstructured.NestedSlice(o.Object, "spec", "ports")
		}
		for _, p := range ports {
			if p.(map[string]any)["name"] == "dashboard" {
				t.Errorf("dashboard.enabled=false: %s has a port named dashboard", key(o))
			}
		}
	}
}
