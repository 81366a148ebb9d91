package benchenv

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// StackWatch counts a namespace's Stacks from a watch, not from lists: with
// thousands of Stacks a list every few seconds would be a large share of
// what the API server and etcd do during the measurement (10,000 Stacks are
// tens of MB of JSON per list), and the benchmark would measure itself.
type StackWatch struct {
	cache cache.Cache
	ns    string
}

// WatchStacks starts a cache of the Stacks in ns and waits until it has
// synced; it stops with ctx or with the Env.
func (e *Env) WatchStacks(ctx context.Context, ns string) (*StackWatch, error) {
	// The cache logs through controller-runtime's logger, which would
	// otherwise print a warning with a stack trace that it was never set.
	log.SetLogger(logr.Discard())
	c, err := cache.New(e.Kube.Config, cache.Options{
		Scheme:            Scheme(),
		DefaultNamespaces: map[string]cache.Config{ns: {}},
	})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &v1alpha1.Stack{}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	e.defer_(cancel)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the benchmark's watch of the Stacks in %s did not sync", ns)
	}
	return &StackWatch{cache: c, ns: ns}, nil
}

// CountApplied counts the Stacks Applied at commit, as Env.CountApplied does
// from a list.
func (w *StackWatch) CountApplied(ctx context.Context, commit string) (applied, total int, notReady []string, err error) {
	var list v1alpha1.StackList
	if err := w.cache.List(ctx, &list, client.InNamespace(w.ns), client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, nil, err
	}
	applied, notReady = countApplied(list.Items, commit)
	return applied, len(list.Items), notReady, nil
}

// WaitAllApplied waits until want Stacks are Applied at commit, checking
// every second and calling progress every `every`. It returns how many were
// applied when it stopped: want, or fewer with an error at the timeout.
func (w *StackWatch) WaitAllApplied(ctx context.Context, commit string, want int, timeout, every time.Duration, progress func(applied int)) (int, error) {
	count := func(ctx context.Context) (int, []string, error) {
		applied, _, notReady, err := w.CountApplied(ctx, commit)
		return applied, notReady, err
	}
	return waitAllApplied(ctx, count, want, timeout, every, time.Second, progress)
}

// Sleep waits for d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
