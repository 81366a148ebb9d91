package source

import (
	"context"
	"sync"
)

// FlightGroup runs one call per key at a time and shares its result with
// every caller that asks while it runs, like x/sync/singleflight, with one
// difference that matters for controllers: the shared call is cancelled
// only when every caller waiting for it has given up. With singleflight it
// would run under the first caller's context, so one reconcile timing out
// would fail all the others that joined it.
type FlightGroup[T any] struct {
	mu    sync.Mutex
	calls map[string]*flightCall[T]
}

type flightCall[T any] struct {
	done    chan struct{}
	val     T
	err     error
	waiters int
	cancel  context.CancelFunc
}

// Do returns the result of fn for key, starting it unless a call for key is
// already running. fn gets a context that keeps the values of the first
// caller's, is not cancelled with it, and is cancelled once no caller waits.
func (g *FlightGroup[T]) Do(ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*flightCall[T]{}
	}
	c, ok := g.calls[key]
	if !ok {
		callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &flightCall[T]{done: make(chan struct{}), cancel: cancel}
		g.calls[key] = c
		go g.run(callCtx, key, c, fn)
	}
	c.waiters++
	g.mu.Unlock()

	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		g.leave(key, c)
		var zero T
		return zero, ctx.Err()
	}
}

func (g *FlightGroup[T]) run(ctx context.Context, key string, c *flightCall[T], fn func(context.Context) (T, error)) {
	defer c.cancel()
	c.val, c.err = fn(ctx)
	g.mu.Lock()
	if g.calls[key] == c {
		delete(g.calls, key)
	}
	g.mu.Unlock()
	close(c.done)
}

// leave drops a waiter; the last one out cancels the call and unregisters
// it, so later callers start afresh instead of joining a cancelled call.
func (g *FlightGroup[T]) leave(key string, c *flightCall[T]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c.waiters--
	if c.waiters > 0 {
		return
	}
	c.cancel()
	if g.calls[key] == c {
		delete(g.calls, key)
	}
}
