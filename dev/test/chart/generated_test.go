package chart_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackpilot/stackpilot/internal/manifests"
)

// `make manifests` copies these files of config/ into the chart, whose
// templates include them; an edit under config/ without `make manifests`
// fails here.
func TestCopiesAreUpToDate(t *testing.T) {
	copies := map[string]string{
		"files/role.yaml":           "config/rbac/role.yaml",
		"files/servicemonitor.yaml": "config/monitoring/servicemonitor.yaml",
		"files/prometheusrule.yaml": "config/monitoring/prometheusrule.yaml",
		"files/dashboard.json":      "config/monitoring/dashboard.json",
	}
	for copied, source := range copies {
		want, err := os.ReadFile(filepath.Join(root(t), source))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir(t), copied))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("charts/stackpilot/%s is not %s: run `make manifests` and commit it", copied, source)
		}
	}
}

// The chart's crds/ are the CRDs config/default renders (internal/manifests,
// whose own test keeps it equal to config/), labels included.
func TestCRDsAreUpToDate(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir(t), "crds", "stackpilot.dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []*unstructured.Unstructured
	for _, o := range kustomize(t, manifests.Options{}) {
		if o.GetKind() == "CustomResourceDefinition" {
			want = append(want, o)
		}
	}
	compare(t, decode(t, data), want)
	if t.Failed() {
		t.Log("charts/stackpilot/crds is stale: run `make manifests` and commit it")
	}
}
