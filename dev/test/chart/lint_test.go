package chart_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// helm lint --strict: with the defaults, and with every value set.
func TestLint(t *testing.T) {
	run(t, "helm", "lint", "--strict", chartDir(t))
	run(t, "helm", "lint", "--strict", chartDir(t), "--values", filepath.Join("testdata", "all-values.yaml"))
}

// Every value set renders the flags and objects they stand for.
func TestAllValues(t *testing.T) {
	objs := helmTemplate(t, "platform", "--values", filepath.Join("testdata", "all-values.yaml"))
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	// Three Deployments (main, shard1, shard2), a Service pair each; the
	// RoleBindings: the digest key's, leader election's, one per watched
	// namespace, the shards' runner Secrets'.
	for kind, n := range map[string]int{"Deployment": 3, "Service": 6, "RoleBinding": 5, "Ingress": 2,
		"ServiceMonitor": 1, "PrometheusRule": 1, "ClusterRoleBinding": 1} {
		if kinds[kind] != n {
			t.Errorf("%d %s, want %d", kinds[kind], kind, n)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		limit, _, _ := unstructured.NestedString(containers[0].(map[string]any), "resources", "limits", "cpu")
		pullSecrets, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "imagePullSecrets")
		tolerations, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "tolerations")
		replicas, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
		if limit != "4" || len(pullSecrets) != 1 || len(tolerations) != 1 || fmt.Sprint(replicas) != "2" {
			t.Errorf("Deployment %s: limits.cpu %q, %d pull secrets, %d tolerations, %v replicas; want the values' 4, 1, 1, 2",
				o.GetName(), limit, len(pullSecrets), len(tolerations), replicas)
		}
	}
	args := strings.Join(managerArgs(t, objs, "stackpilot-controller"), " ")
	for _, want := range []string{"--runner-image=pulumi/pulumi-nodejs:3.276.0", "--max-concurrent-jobs=10",
		"--concurrent-operations=4", "--default-backend=s3://pulumi-state/{namespace}", "--watch-namespace=team-a,team-b",
		"--default-service-account=deployer", "--allow-cross-namespace-refs", "--logs-cert-dir=/etc/stackpilot/logs-tls",
		"--dashboard-bind-address=:8445"} {
		if !strings.Contains(args, want) {
			t.Errorf("the manager's args lack %s: %s", want, args)
		}
	}
}

// managerArgs are the manager container's args of Deployment name.
func managerArgs(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != name {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m, _ := c.(map[string]any); m["name"] == "manager" {
				args, _, _ := unstructured.NestedStringSlice(m, "args")
				return args
			}
		}
	}
	t.Fatalf("no Deployment %s with a container manager", name)
	return nil
}

// The schema refuses a bad value, saying which and what it takes.
func TestSchemaRefuses(t *testing.T) {
	for _, c := range []struct {
		set, want string
	}{
		{"executor=Foo", "at '/executor': value must be one of 'Job', 'Local'"},
		{"rbac.scope=namespaces", "at '/watchNamespaces': minItems: got 0, want 1"},
		{"shards={Shard_1}", "at '/shards/0'"},
		{"replicas=two", "at '/replicas'"},
		{"unknownValue=1", "additional properties 'unknownValue' not allowed"},
	} {
		_, stderr, err := runErr(t, "helm", "template", "stackpilot", chartDir(t), "--set", c.set)
		if err == nil {
			t.Errorf("--set %s: rendered, want refused", c.set)
			continue
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("--set %s: %s\nwant it to say %q", c.set, stderr, c.want)
		}
	}
}
