// Package chart_test checks the Helm chart (charts/stackpilot) against the
// kustomize manifests in config/, which `stackpilot install` applies: the
// chart's hand-written templates render, object by object, what config/
// renders for the same choices, so the two cannot drift; its generated
// copies are up to date; helm lint passes; the values schema refuses bad
// values. It needs bin/helm and bin/kubectl (`make tools`), no cluster.
package chart_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// root is the repository's root.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// tool is bin/<name>; the test is skipped without it (`make tools` builds it).
func tool(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(root(t), "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no bin/%s (run `make tools`): %v", name, err)
	}
	return path
}

func chartDir(t *testing.T) string { return filepath.Join(root(t), "charts", "stackpilot") }

// run runs a tool and returns its stdout, failing the test with its stderr.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, stderr, err := runErr(t, name, args...)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr)
	}
	return out
}

func runErr(t *testing.T, name string, args ...string) ([]byte, string, error) {
	t.Helper()
	cmd := exec.Command(tool(t, name), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.Bytes(), stderr.String(), err
}

// helmTemplate renders the chart as release "stackpilot" in namespace ns,
// CRDs included, with the extra helm args (--set ...).
func helmTemplate(t *testing.T, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	all := append([]string{"template", "stackpilot", chartDir(t), "--namespace", ns, "--include-crds"}, args...)
	return decode(t, run(t, "helm", all...))
}

// decode splits a YAML stream into objects the way internal/manifests does
// (YAML to JSON), so that numbers and empty values compare alike.
func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := r.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decode: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: normal(t, m)})
	}
}

// normal is m through JSON: both sides of a comparison hold the same Go types.
func normal(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// chartAppVersion is Chart.yaml's appVersion, the default image tag.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion == "" {
		t.Fatal("Chart.yaml has no appVersion")
	}
	return chart.AppVersion
}
