package manifests

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func managerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range c[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	return args
}

func stringMap(t *testing.T, o *unstructured.Unstructured, path ...string) map[string]string {
	t.Helper()
	m, _, err := unstructured.NestedStringMap(o.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestObjectsShards: each shard gets a Deployment, a Service and a runner
// Service of its own, whose selectors pick its Pods and no other
// Deployment's; its controller serves its label value only and its runner
// Pods call its own runner Service; the main controller serves the unlabelled
// rest and keeps the unsharded install's Lease.
func TestObjectsShards(t *testing.T) {
	objs, err := Objects(Options{Namespace: "platform", Image: "registry.example/sp:v1", Shards: []string{"shard1", "shard2"}})
	if err != nil {
		t.Fatal(err)
	}
	main := find(t, objs, "Deployment", DeploymentName)
	mainArgs := managerArgs(t, main)
	if !slices.Contains(mainArgs, "--watch-label-selector=!sharding.fluxcd.io/key") || !slices.Contains(mainArgs, "--leader-election-id="+MainLeaderElectionID) {
		t.Errorf("the main controller's args: %v", mainArgs)
	}
	// A leader's Pod also carries stackpilot.dev/leader=true, set at run
	// time (cmd/controller/leader_label.go), which the runner Services select.
	leader := func(labels map[string]string) map[string]string {
		labels["stackpilot.dev/leader"] = "true"
		return labels
	}
	podLabelsOf := map[string]map[string]string{DeploymentName: leader(stringMap(t, main, "spec", "template", "metadata", "labels"))}
	for _, s := range []string{"shard1", "shard2"} {
		d := find(t, objs, "Deployment", "stackpilot-controller-"+s)
		if d.GetNamespace() != "platform" || d.GetLabels()[ShardPodLabel] != s {
			t.Errorf("Deployment %s: namespace %q, labels %v", d.GetName(), d.GetNamespace(), d.GetLabels())
		}
		args := managerArgs(t, d)
		if !slices.Contains(args, "--watch-label-selector=sharding.fluxcd.io/key in ("+s+")") {
			t.Errorf("%s's args: %v", s, args)
		}
		if !slices.Contains(args, "--runner-endpoint=https://stackpilot-runner-"+s+".$(POD_NAMESPACE).svc:9444") {
			t.Errorf("%s's runner Pods do not call its own runner Service: %v", s, args)
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--leader-election-id=") }) {
			t.Errorf("%s shares a Lease by name: %v", s, args)
		}
		c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if img := c[0].(map[string]any)["image"]; img != "registry.example/sp:v1" {
			t.Errorf("%s's image: %v", s, img)
		}
		podLabelsOf[d.GetName()] = leader(stringMap(t, d, "spec", "template", "metadata", "labels"))
		for _, svcName := range []string{"stackpilot-controller-" + s, "stackpilot-runner-" + s} {
			svc := find(t, objs, "Service", svcName)
			if svc.GetLabels()["app.kubernetes.io/name"] != DeploymentName || svc.GetLabels()[ShardPodLabel] != s {
				t.Errorf("Service %s's labels (the ServiceMonitor selects app.kubernetes.io/name=%s): %v", svcName, DeploymentName, svc.GetLabels())
			}
		}
	}
	// Every Deployment's and Service's selector picks the Pods of exactly
	// one Deployment: overlapping Deployment selectors fight over Pods, and
	// a Service of one shard must not reach another's controller.
	selectors := map[string]map[string]string{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			selectors[o.GetKind()+" "+o.GetName()] = stringMap(t, o, "spec", "selector", "matchLabels")
		case "Service":
			selectors[o.GetKind()+" "+o.GetName()] = stringMap(t, o, "spec", "selector")
		}
	}
	for what, sel := range selectors {
		var picks []string
		for d, labels := range podLabelsOf {
			if matches(sel, labels) {
				picks = append(picks, d)
			}
		}
		if len(picks) != 1 {
			t.Errorf("%s (selector %v) picks the Pods of %v", what, sel, picks)
		}
	}
	if got, want := len(objs), len(mustObjects(t, Options{}))+6; got != want {
		t.Errorf("%d objects, want %d (3 per shard)", got, want)
	}
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func mustObjects(t *testing.T, opts Options) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Objects(opts)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestObjectsShardsUnsharded: without shards nothing changes, and with the
// Local executor the shards copy Local's args (no runner endpoint).
func TestObjectsShardsLocal(t *testing.T) {
	objs := mustObjects(t, Options{Executor: "Local", Shards: []string{"a"}})
	args := managerArgs(t, find(t, objs, "Deployment", "stackpilot-controller-a"))
	if !slices.Contains(args, "--default-executor=Local") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--runner-endpoint") }) {
		t.Errorf("a Local shard's args: %v", args)
	}
	for _, o := range mustObjects(t, Options{}) {
		if o.GetKind() == "Deployment" && slices.ContainsFunc(managerArgs(t, o), func(a string) bool { return strings.HasPrefix(a, "--watch-label-selector") }) {
			t.Errorf("an unsharded install has a selector: %v", managerArgs(t, o))
		}
	}
}

func TestObjectsShardNames(t *testing.T) {
	for _, bad := range [][]string{{"Shard1"}, {"shard_1"}, {"-a"}, {""}, {"a", "a"}, {"a,b"}, {"a) ,x in (b"}, {strings.Repeat("a", 41)}} {
		if _, err := Objects(Options{Shards: bad}); err == nil {
			t.Errorf("shards %q accepted", bad)
		}
	}
	if got := ShardNames(3); !slices.Equal(got, []string{"shard1", "shard2", "shard3"}) {
		t.Errorf("ShardNames(3) = %v", got)
	}
}
