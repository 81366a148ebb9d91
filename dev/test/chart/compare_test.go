package chart_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/internal/manifests"
)

// helmLabels are the labels the chart adds to every object for Helm's sake;
// config/ has none of them. Nothing else may differ.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// kustomize is manifests.Objects(opts): config/default as `stackpilot
// install` applies it.
func kustomize(t *testing.T, opts manifests.Options) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Objects(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o.Object = normal(t, o.Object)
	}
	return objs
}

func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s %s/%s", o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
}

// withoutHelmLabels drops the labels of helmLabels (and labels left empty).
func withoutHelmLabels(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	labels := o.GetLabels()
	for _, l := range helmLabels {
		delete(labels, l)
	}
	o.SetLabels(labels)
	return o
}

// compare fails unless the chart's objects are want's, each equal but for
// Helm's labels. Helm orders objects by kind; the comparison does not.
func compare(t *testing.T, chart, want []*unstructured.Unstructured) {
	t.Helper()
	got := map[string]*unstructured.Unstructured{}
	for _, o := range chart {
		got[key(o)] = withoutHelmLabels(o)
	}
	var keys []string
	for _, w := range want {
		k := key(w)
		keys = append(keys, k)
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart has no %s", k)
			continue
		}
		delete(got, k)
		if !reflect.DeepEqual(g.Object, w.Object) {
			t.Errorf("%s differs (- config/, + chart):\n%s", k, diff(w.Object, g.Object))
		}
	}
	var extra []string
	for k := range got {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		t.Errorf("the chart has %s, config/ does not", k)
	}
	t.Logf("compared %d objects", len(keys))
}

// diff is a line diff of the objects as YAML: the lines only one side has.
func diff(want, got map[string]any) string {
	w, _ := yaml.Marshal(want)
	g, _ := yaml.Marshal(got)
	wl, gl := strings.Split(string(w), "\n"), strings.Split(string(g), "\n")
	count := map[string]int{}
	for _, l := range gl {
		count[l]++
	}
	var b strings.Builder
	for _, l := range wl {
		if count[l] > 0 {
			count[l]--
			continue
		}
		fmt.Fprintf(&b, "- %s\n", l)
	}
	count = map[string]int{}
	for _, l := range wl {
		count[l]++
	}
	for _, l := range gl {
		if count[l] > 0 {
			count[l]--
			continue
		}
		fmt.Fprintf(&b, "+ %s\n", l)
	}
	return b.String()
}

// without drops the objects of kind.
func without(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != kind {
			out = append(out, o)
		}
	}
	return out
}

// The default values install config/default with the image of the chart's
// release (as `stackpilot install` of that version does), except the
// Namespace: `helm install` needs it to exist already (createNamespace).
func TestDefaultValuesAreConfigDefault(t *testing.T) {
	image := manifests.ImageRepository + ":" + chartAppVersion(t)
	compare(t, helmTemplate(t, manifests.DefaultNamespace),
		without(kustomize(t, manifests.Options{Image: image}), "Namespace"))
}

func TestLocalExecutorIsConfigLocal(t *testing.T) {
	image := manifests.ImageRepository + ":" + chartAppVersion(t)
	compare(t, helmTemplate(t, manifests.DefaultNamespace, "--set", "executor=Local"),
		without(kustomize(t, manifests.Options{Executor: "Local", Image: image}), "Namespace"))
}

// Another namespace, created by the chart: every namespaced object and every
// binding's subject moves, as with `stackpilot install --namespace`.
func TestNamespace(t *testing.T) {
	image := manifests.ImageRepository + ":" + chartAppVersion(t)
	compare(t, helmTemplate(t, "platform", "--set", "createNamespace=true"),
		kustomize(t, manifests.Options{Namespace: "platform", Image: image}))
}

func TestImage(t *testing.T) {
	compare(t, helmTemplate(t, manifests.DefaultNamespace,
		"--set", "image.repository=registry.example.com/team/stackpilot", "--set", "image.tag=v9.8.7"),
		without(kustomize(t, manifests.Options{Image: "registry.example.com/team/stackpilot:v9.8.7"}), "Namespace"))
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	compare(t, helmTemplate(t, manifests.DefaultNamespace,
		"--set", "image.repository=registry.example.com/team/stackpilot", "--set", "image.digest="+digest),
		without(kustomize(t, manifests.Options{Image: "registry.example.com/team/stackpilot@" + digest}), "Namespace"))
}

// Shards render what `stackpilot install --shards` does: a Deployment and
// two Services per shard, the main Deployment serving the unlabelled Stacks.
func TestShards(t *testing.T) {
	image := manifests.ImageRepository + ":" + chartAppVersion(t)
	shards := []string{"shard1", "shard2"}
	compare(t, helmTemplate(t, manifests.DefaultNamespace, "--set", "shards={"+strings.Join(shards, ",")+"}"),
		without(kustomize(t, manifests.Options{Image: image, Shards: shards}), "Namespace"))
	compare(t, helmTemplate(t, manifests.DefaultNamespace, "--set", "shards={a}", "--set", "executor=Local"),
		without(kustomize(t, manifests.Options{Image: image, Shards: []string{"a"}, Executor: "Local"}), "Namespace"))
}

// The monitoring values render config/monitoring.
func TestMonitoringIsConfigMonitoring(t *testing.T) {
	chart := helmTemplate(t, manifests.DefaultNamespace, "--show-only", "templates/monitoring.yaml",
		"--set", "monitoring.serviceMonitor.enabled=true",
		"--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.grafanaDashboard.enabled=true")
	want := decode(t, run(t, "kubectl", "kustomize", filepath.Join(root(t), "config", "monitoring")))
	compare(t, chart, want)
}

// With the monitoring values off (the default) nothing needs the Prometheus
// Operator's CRDs.
func TestMonitoringOffByDefault(t *testing.T) {
	for _, o := range helmTemplate(t, manifests.DefaultNamespace) {
		if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") || o.GetName() == "stackpilot-dashboard" {
			t.Errorf("the default values render %s", key(o))
		}
	}
}
