package source

import (
	"context"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
)

// Indexed returns the tree the store's index maps key to, when it is still
// stored.
func Indexed(store *artifact.Store, key string) (artifact.Artifact, bool) {
	digest, ok := store.Lookup(key)
	if !ok {
		return artifact.Artifact{}, false
	}
	return store.Get(digest)
}

// FetchOnce returns the tree indexed under key in store or, when there is
// none, what fetch brings: one fetch for all concurrent callers of a store
// and key (fetch must index its result under key), bounded by timeout when
// it is positive. A caller that waited for another's fetch looks at the
// index again first, so a fetch that just finished is not repeated.
func FetchOnce(ctx context.Context, flight *FlightGroup[artifact.Artifact], store *artifact.Store, key string, timeout time.Duration, fetch func(context.Context) (artifact.Artifact, error)) (artifact.Artifact, error) {
	if a, ok := Indexed(store, key); ok {
		return a, nil
	}
	return flight.Do(ctx, store.Root()+"\x00"+key, func(ctx context.Context) (artifact.Artifact, error) {
		if a, ok := Indexed(store, key); ok {
			return a, nil
		}
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return fetch(ctx)
	})
}
