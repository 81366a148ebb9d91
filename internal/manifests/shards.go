package manifests

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The names a sharded install gives. Shard K is served by the Deployment
// ShardDeploymentName(K) and reached through the Services
// ShardServiceName(K) (metrics, webhooks, logs) and "stackpilot-runner-K"
// (its runner Pods' channel).
const (
	// ShardPodLabel carries a shard controller's shard on its Deployment,
	// Pods and Services, so that `kubectl get pods -l stackpilot.dev/shard`
	// lists them and their metrics can be told apart.
	ShardPodLabel = "stackpilot.dev/shard"
	// MainLeaderElectionID is the Lease of the main controller. An unsharded
	// controller uses it by default; the main controller of a sharded install
	// names it explicitly (its selector would otherwise give it a Lease of
	// its own), so that going from one controller to shards hands over
	// within one Lease instead of letting the old and new Pods both lead
	// during the rollout.
	MainLeaderElectionID = "stackpilot-controller-leader"
	// runnerServiceName is the Service runner Pods of the main controller call.
	runnerServiceName = "stackpilot-runner"
	nameLabel         = "app.kubernetes.io/name"
	selectorFlag      = "--watch-label-selector="
	runnerEndpointArg = "--runner-endpoint="
	leaderIDFlag      = "--leader-election-id="
)

// MainShardSelector is the main controller's selector in a sharded install:
// everything without a shard label.
const MainShardSelector = "!" + v1alpha1.ShardLabel

// ShardSelector is shard's controller's selector.
func ShardSelector(shard string) string {
	return v1alpha1.ShardLabel + " in (" + shard + ")"
}

// ShardDeploymentName is the Deployment of shard's controller.
func ShardDeploymentName(shard string) string { return DeploymentName + "-" + shard }

// ShardServiceName is the Service of shard's controller (metrics, webhooks,
// logs): point a Git host at its webhooks port for the Receivers of that
// shard; `stackpilot logs` finds it from the Stack's shard label.
func ShardServiceName(shard string) string { return DeploymentName + "-" + shard }

// ShardNames are the names `stackpilot install --shards n` gives: shard1 to
// shardN, as Flux's sharding guide names them.
func ShardNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("shard%d", i+1)
	}
	return names
}

// shardNamePattern: a shard name is a label value, a DNS label suffix (it
// ends Deployment and Service names) and a word of a set-based selector.
var shardNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// checkShards refuses names that cannot name a shard, and repeats.
func checkShards(shards []string) error {
	for i, s := range shards {
		if len(s) > 40 || !shardNamePattern.MatchString(s) {
			return fmt.Errorf("shard %q: want lower-case letters, digits and '-', starting and ending with a letter or digit, at most 40 characters", s)
		}
		if slices.Contains(shards[:i], s) {
			return fmt.Errorf("shard %q is named twice", s)
		}
	}
	return nil
}

// shard makes objs a sharded install: the main controller serves what has no
// shard label, and each shard gets a copy of the controller's Deployment and
// of its two Services, selecting that shard's Pods only. Everything else
// (the ServiceAccount, RBAC, the digest key, the namespace) is shared, as
// docs/guide/sharding.md requires.
func shard(objs []*unstructured.Unstructured, shards []string) ([]*unstructured.Unstructured, error) {
	if len(shards) == 0 {
		return objs, nil
	}
	if err := checkShards(shards); err != nil {
		return nil, err
	}
	var deployment, controllerSvc, runnerSvc *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == DeploymentName:
			deployment = o
		case o.GetKind() == "Service" && o.GetName() == DeploymentName:
			controllerSvc = o
		case o.GetKind() == "Service" && o.GetName() == runnerServiceName:
			runnerSvc = o
		}
	}
	if deployment == nil || controllerSvc == nil || runnerSvc == nil {
		return nil, fmt.Errorf("embedded manifests: no Deployment %s, or no Service %s or %s", DeploymentName, DeploymentName, runnerServiceName)
	}
	var added []*unstructured.Unstructured
	for _, s := range shards {
		d, err := shardDeployment(deployment, s)
		if err != nil {
			return nil, err
		}
		svc, err := shardService(controllerSvc, ShardServiceName(s), s)
		if err != nil {
			return nil, err
		}
		runner, err := shardService(runnerSvc, runnerServiceName+"-"+s, s)
		if err != nil {
			return nil, err
		}
		added = append(added, svc, runner, d)
	}
	if err := editArgs(deployment, func(args []string) []string {
		return append(args, selectorFlag+MainShardSelector, leaderIDFlag+MainLeaderElectionID)
	}); err != nil {
		return nil, err
	}
	// The shards' objects go after the main Deployment, in the order the
	// rendering has (Services before Deployments).
	i := slices.Index(objs, deployment)
	return slices.Insert(slices.Clone(objs), i+1, added...), nil
}

// shardDeployment is a copy of the controller's Deployment serving shard.
func shardDeployment(main *unstructured.Unstructured, shard string) (*unstructured.Unstructured, error) {
	d := main.DeepCopy()
	name := ShardDeploymentName(shard)
	d.SetName(name)
	d.SetLabels(shardLabels(d.GetLabels(), name, shard))
	if err := unstructured.SetNestedStringMap(d.Object, map[string]string{nameLabel: name}, "spec", "selector", "matchLabels"); err != nil {
		return nil, err
	}
	podLabels, _, err := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "labels")
	if err != nil {
		return nil, fmt.Errorf("the Deployment %s: Pod labels: %w", main.GetName(), err)
	}
	if err := unstructured.SetNestedStringMap(d.Object, shardLabels(podLabels, name, shard), "spec", "template", "metadata", "labels"); err != nil {
		return nil, err
	}
	err = editArgs(d, func(args []string) []string {
		for i, a := range args {
			if strings.HasPrefix(a, runnerEndpointArg) {
				// Its runner Pods must reach this shard's controller, which
				// registered their operations.
				args[i] = strings.Replace(a, "://"+runnerServiceName+".", "://"+runnerServiceName+"-"+shard+".", 1)
			}
		}
		return append(args, selectorFlag+ShardSelector(shard))
	})
	return d, err
}

// shardService is a copy of svc named name, selecting shard's Pods. Its own
// labels keep app.kubernetes.io/name, so that what selects the controller's
// Services (the ServiceMonitor) selects the shards' too.
func shardService(svc *unstructured.Unstructured, name, shard string) (*unstructured.Unstructured, error) {
	s := svc.DeepCopy()
	s.SetName(name)
	labels := s.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ShardPodLabel] = shard
	s.SetLabels(labels)
	selector, _, err := unstructured.NestedStringMap(s.Object, "spec", "selector")
	if err != nil {
		return nil, fmt.Errorf("the Service %s: selector: %w", svc.GetName(), err)
	}
	selector[nameLabel] = ShardDeploymentName(shard)
	return s, unstructured.SetNestedStringMap(s.Object, selector, "spec", "selector")
}

// shardLabels are labels with the name and shard of a shard's controller.
func shardLabels(labels map[string]string, name, shard string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	out[nameLabel] = name
	out[ShardPodLabel] = shard
	return out
}

// editArgs replaces the manager container's args of Deployment d by
// edit(args).
func editArgs(d *unstructured.Unstructured, edit func([]string) []string) error {
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return fmt.Errorf("the Deployment %s: containers: %w", d.GetName(), err)
	}
	for _, c := range containers {
		m, ok := c.(map[string]any)
		if !ok || m["name"] != ContainerName {
			continue
		}
		var args []string
		for _, a := range m["args"].([]any) {
			s, _ := a.(string)
			args = append(args, s)
		}
		var out []any
		for _, a := range edit(args) {
			out = append(out, a)
		}
		m["args"] = out
		return unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers")
	}
	return fmt.Errorf("the Deployment %s has no container %s", d.GetName(), ContainerName)
}
