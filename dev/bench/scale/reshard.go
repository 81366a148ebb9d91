package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
)

// Resharding a kept fleet: -resume DIR -shards M, where the kept run had
// another layout. It is what a user does who adds shards to a running fleet
// (`stackpilot install --shards M`, then the Stacks relabelled), done while
// the controllers are stopped: every Stack is relabelled for the new layout
// first, then the new layout's controllers start, and the restart is
// measured as any other (every Stack reconciled by the controller that now
// serves it, the goal no Pulumi process). That works because every
// controller of the benchmark keeps its Stacks' state in the one state
// directory (startFleet), as shards share a backend in a cluster.
//
// So the same 10,000 Stacks are measured on one controller and on 4 shards
// in one sitting: each commit takes about an hour, a creation about two.

// stackName is the name of the fleet's Stack i.
func stackName(i int) string {
	return fmt.Sprintf("s%05d", i)
}

// relabel labels each of the n Stacks for its shard in a layout of shards
// (removing the label for one controller), 16 patches at a time.
func relabel(ctx context.Context, e *benchenv.Env, n, shards int) (time.Duration, error) {
	t0 := time.Now()
	err := benchenv.Parallel(ctx, n, 16, func(i int) error {
		var value any // null removes the label
		if shard := shardOf(i, shards); shard != "" {
			value = shard
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{shardKey: value}}})
		if err != nil {
			return err
		}
		s := &v1alpha1.Stack{}
		s.Namespace, s.Name = namespace, stackName(i)
		if err := e.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("relabel Stack %s: %w", s.Name, err)
		}
		return nil
	})
	return time.Since(t0), err
}
