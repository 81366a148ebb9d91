package benchenv

import (
	"context"
	"sync"
	"sync/atomic"
)

// Parallel calls fn(i) for each i in [0, n), at most parallel at a time, and
// returns the first error. After an error, or once ctx ends, no new call
// starts; the calls already running finish.
func Parallel(ctx context.Context, n, parallel int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	var failed atomic.Bool
	for range max(parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil || failed.Load() {
					return
				}
				if err := fn(i); err != nil {
					failed.Store(true)
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}
