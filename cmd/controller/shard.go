package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// defaultLeaderElectionID is the Lease of an unsharded controller.
const defaultLeaderElectionID = "stackpilot-controller-leader"

// parseWatchSelector reads --watch-label-selector: nil when it is empty (the
// controller serves every Stack, Receiver and Alert), else the selector its
// caches are limited to. A selector that does not parse stops the start,
// saying how to write one.
func parseWatchSelector(s string) (labels.Selector, error) {
	if s == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--watch-label-selector %q: %w; write a Kubernetes label selector, for example %q on a shard and %q on the main controller",
			s, err, "sharding.fluxcd.io/key in (shard1)", "!sharding.fluxcd.io/key")
	}
	if sel.Empty() {
		return nil, nil
	}
	return sel, nil
}

// leaderElectionID is the Lease this controller's replicas elect their
// leader with: --leader-election-id when set; else, unsharded, the one
// Lease of the single controller; else one per shard, named after a hash of
// the selector in its canonical form, so that the replicas of one shard
// share a Lease (whatever the order they write its terms in) and shards
// never wait for each other.
func leaderElectionID(flagValue string, sel labels.Selector) string {
	switch {
	case flagValue != "":
		return flagValue
	case sel == nil:
		return defaultLeaderElectionID
	}
	sum := sha256.Sum256([]byte(sel.String()))
	return defaultLeaderElectionID + "-" + hex.EncodeToString(sum[:])[:10]
}

// shardedObjects limits the cache of the kinds a shard serves to its
// selector; Secrets, ConfigMaps, Jobs and Flux sources stay unfiltered
// (they carry no shard label). Nil when the controller is not sharded.
func shardedObjects(sel labels.Selector) map[client.Object]cache.ByObject {
	if sel == nil {
		return nil
	}
	return map[client.Object]cache.ByObject{
		&v1alpha1.Stack{}:    {Label: sel},
		&v1alpha1.Receiver{}: {Label: sel},
		&v1alpha1.Alert{}:    {Label: sel},
	}
}

// allStacksCache is, on a shard, a cache of its own for the metadata of
// every Stack (the manager's cache holds the shard's Stacks only): the
// Stacks of other shards wake the Stacks here that depend on them. Nil when
// the controller is not sharded.
func allStacksCache(mgr ctrl.Manager, opts ctrl.Options, sel labels.Selector) (cache.Cache, error) {
	if sel == nil {
		return nil, nil
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: opts.Cache.DefaultNamespaces,
		DefaultTransform:  opts.Cache.DefaultTransform,
	})
	if err != nil {
		return nil, fmt.Errorf("the cache of all shards' Stacks: %w", err)
	}
	return c, mgr.Add(c)
}

// selectorString is the selector for the log ("" when unsharded).
func selectorString(sel labels.Selector) string {
	if sel == nil {
		return ""
	}
	return sel.String()
}
