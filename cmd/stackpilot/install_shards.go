package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/manifests"
)

// maxShards bounds --shards: each shard is a controller Pod (and its
// Leases, caches and Services); past a few dozen a fleet wants fewer,
// larger shards.
const maxShards = 64

func shardsNote(shards []string) string {
	if len(shards) == 0 {
		return ""
	}
	return fmt.Sprintf(", %d shard(s) besides the main controller", len(shards))
}

func shardDeployments(shards []string) []string {
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = manifests.ShardDeploymentName(s)
	}
	return names
}

// installedByUs picks only what an install made (config/default labels all
// of it part-of stackpilot): a Deployment of the user's that happens to carry
// a stackpilot.dev/shard label is never removed.
var installedByUs = client.MatchingLabels{"app.kubernetes.io/part-of": "stackpilot"}

// installedShard is a shard an earlier install made, and its objects.
type installedShard struct {
	name    string
	objects []client.Object
}

// unwantedShards finds the shards installed in ns (their Deployments and
// Services carry manifests.ShardPodLabel) that shards no longer names. It
// refuses when a Stack, Receiver or Alert is still labelled for one of them:
// without its controller nothing would serve it, and the user must choose
// where it goes.
func unwantedShards(ctx context.Context, cl client.Client, ns string, shards []string) ([]installedShard, error) {
	found := map[string]*installedShard{}
	add := func(o client.Object) {
		s := o.GetLabels()[manifests.ShardPodLabel]
		if s == "" || slices.Contains(shards, s) {
			return
		}
		if found[s] == nil {
			found[s] = &installedShard{name: s}
		}
		found[s].objects = append(found[s].objects, o)
	}
	var deployments appsv1.DeploymentList
	if err := cl.List(ctx, &deployments, client.InNamespace(ns), installedByUs, client.HasLabels{manifests.ShardPodLabel}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list the installed shards: %w", err)
	}
	for i := range deployments.Items {
		add(&deployments.Items[i])
	}
	var services corev1.ServiceList
	if err := cl.List(ctx, &services, client.InNamespace(ns), installedByUs, client.HasLabels{manifests.ShardPodLabel}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list the installed shards' Services: %w", err)
	}
	for i := range services.Items {
		add(&services.Items[i])
	}
	if len(found) == 0 {
		return nil, nil
	}
	var gone []installedShard
	var names []string
	for name, s := range found {
		gone = append(gone, *s)
		names = append(names, name)
	}
	sort.Strings(names)
	sort.Slice(gone, func(i, j int) bool { return gone[i].name < gone[j].name })
	still, err := labelledFor(ctx, cl, names)
	if err != nil {
		return nil, err
	}
	if len(still) > 0 {
		return nil, fmt.Errorf("the shard(s) %s would be removed, but %s still labelled for them and would be served by no controller: "+
			"move them first (`kubectl label stack NAME -n NAMESPACE %s=<another shard> --overwrite`, or `%s-` for the main controller), or install with more shards",
			strings.Join(names, ", "), strings.Join(still, ", "), v1alpha1.ShardLabel, v1alpha1.ShardLabel)
	}
	return gone, nil
}

// labelledFor names the Stacks, Receivers and Alerts, in every namespace,
// labelled for one of shards.
func labelledFor(ctx context.Context, cl client.Client, shards []string) ([]string, error) {
	sel := client.MatchingLabels{}
	var out []string
	lists := []struct {
		kind string
		list client.ObjectList
	}{{"Stack", &v1alpha1.StackList{}}, {"Receiver", &v1alpha1.ReceiverList{}}, {"Alert", &v1alpha1.AlertList{}}}
	for _, shard := range shards {
		sel[v1alpha1.ShardLabel] = shard
		for _, l := range lists {
			if err := cl.List(ctx, l.list, sel); err != nil {
				if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
					continue // no such kind yet
				}
				return nil, fmt.Errorf("list the %ss labelled %s=%s: %w", l.kind, v1alpha1.ShardLabel, shard, err)
			}
			items, err := meta.ExtractList(l.list)
			if err != nil {
				return nil, err
			}
			for _, item := range items {
				if o, ok := item.(client.Object); ok {
					out = append(out, fmt.Sprintf("%s %s/%s (%s)", l.kind, o.GetNamespace(), o.GetName(), shard))
				}
			}
		}
	}
	return out, nil
}

// removeShards deletes the Deployments and Services of the shards gone.
func (c *cli) removeShards(ctx context.Context, cl client.Client, gone []installedShard) error {
	for _, s := range gone {
		for _, o := range s.objects {
			if err := cl.Delete(ctx, o, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("remove shard %s: %s %s: %w", s.name, kindOf(o), o.GetName(), err)
			}
			fmt.Fprintf(c.stderr, "✔ shard %s: %s %s/%s removed\n", s.name, kindOf(o), o.GetNamespace(), o.GetName())
		}
	}
	return nil
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Service:
		return "Service"
	}
	return fmt.Sprintf("%T", o)
}
