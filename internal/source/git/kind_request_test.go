package git

import (
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/internal/source"
)

// A reconcile-now request with a trusted time shares any listing made since;
// one without skips the cache; no request takes the cache as it is.
func TestRequestedResolve(t *testing.T) {
	if opts := requestedResolve(source.ResolveRequest{}); len(opts) != 0 {
		t.Fatal("no request, no option")
	}
	if opts := requestedResolve(source.ResolveRequest{Requested: true}); len(opts) != 1 {
		t.Fatal("an untimed request forces a listing")
	}
	if opts := requestedResolve(source.ResolveRequest{Requested: true, RequestedAt: time.Now()}); len(opts) != 1 {
		t.Fatal("a timed request takes a listing made since")
	}
}
