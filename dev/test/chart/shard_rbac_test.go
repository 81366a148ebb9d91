package chart_test

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stackpilot/stackpilot/internal/manifests"
)

// Scoped to namespaces, a shard's controller may read and renew its runner
// certificate, which it keeps in a Secret of its own in the release
// namespace, named after its Lease (cmd/controller's
// TestLeaderElectionIDPerShard pins the same names); the ClusterRole,
// bound in the watched namespaces only, does not reach there. Without the
// grant a shard's Pod exits at start (the cluster test's helm upgrade with a
// shard saw it). Cluster-wide, the ClusterRole covers it and the chart adds
// nothing: what `stackpilot install --shards` applies (TestShards).
func TestShardRunnerSecretsGrantedByName(t *testing.T) {
	ns := manifests.DefaultNamespace
	objs := helmTemplate(t, ns, "--set", "shards={shard1,shard2}", "--set", "rbac.scope=namespaces", "--set", "watchNamespaces={infra}")
	role := find[rbacv1.Role](t, objs, "Role", ns, "stackpilot-shard-runner-tls")
	if len(role.Rules) != 1 {
		t.Fatalf("Role %s: %d rules, want 1: %+v", role.Name, len(role.Rules), role.Rules)
	}
	r := role.Rules[0]
	want := []string{"stackpilot-runner-tls-7ee98f291c", "stackpilot-runner-tls-eb94278bae"}
	if !slices.Equal(r.ResourceNames, want) || !slices.Equal(r.Resources, []string{"secrets"}) || !slices.Equal(r.Verbs, []string{"get", "update"}) || !slices.Equal(r.APIGroups, []string{""}) {
		t.Errorf("Role %s grants %v %v %v named %v; want get, update of the secrets %v", role.Name, r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, want)
	}
	binding := find[rbacv1.RoleBinding](t, objs, "RoleBinding", ns, "stackpilot-shard-runner-tls")
	if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Name != "stackpilot-controller" || binding.Subjects[0].Namespace != ns {
		t.Errorf("RoleBinding %s: %+v to %+v; want the Role for the controller's ServiceAccount", binding.Name, binding.RoleRef, binding.Subjects)
	}

	for _, o := range helmTemplate(t, ns, "--set", "rbac.scope=namespaces", "--set", "watchNamespaces={infra}") {
		if o.GetName() == "stackpilot-shard-runner-tls" {
			t.Errorf("without shards the chart renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

// find converts the object of kind, namespace and name among objs to T.
func find[T any](t *testing.T, objs []*unstructured.Unstructured, kind, namespace, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			var v T
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &v); err != nil {
				t.Fatal(err)
			}
			return &v
		}
	}
	t.Fatalf("the chart renders no %s %s/%s", kind, namespace, name)
	return nil
}
