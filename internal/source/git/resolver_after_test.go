package git

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// One push asks many Stacks on one repository to reconcile at t: with
// FetchedAfter(t) they share one ls-remote that sees the push, where Force
// would make one each.
func TestFetchedAfterSharesOneRequestAfterThePush(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	srv.Commit(t, "app", "main", map[string]string{"a": "1"}, "1")
	r := NewResolver()
	_, err := r.Resolve(ctx, url, Ref{Branch: "main"}, nil, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Requests()).To(Equal(int64(1)))

	c2 := srv.Commit(t, "app", "main", map[string]string{"a": "2"}, "2")
	pushed := time.Now()
	// Resolved one after the other, as a controller with few workers does.
	for range 50 {
		rev, err := r.Resolve(ctx, url, Ref{Branch: "main"}, nil, time.Hour, FetchedAfter(pushed))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rev.Commit).To(Equal(c2), "the listing made before the push is not reused")
	}
	// And concurrently.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			_, err := r.Resolve(ctx, url, Ref{}, nil, time.Hour, FetchedAfter(pushed))
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
	wg.Wait()
	g.Expect(r.Requests()).To(Equal(int64(2)), "100 resolutions after one push, one ls-remote")

	// A time ahead of the resolver's clock cannot be satisfied by waiting:
	// it goes to the server, as Force does.
	_, err = r.Resolve(ctx, url, Ref{}, nil, time.Hour, FetchedAfter(time.Now().Add(time.Hour)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Requests()).To(Equal(int64(3)))
}

func TestInvalidateDropsEveryFormOfTheRepository(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.URL("app")
	other := srv.URL("other")
	srv.Commit(t, "app", "main", map[string]string{"a": "1"}, "1")
	srv.Commit(t, "other", "main", map[string]string{"a": "1"}, "1")
	r := NewResolver()
	for _, u := range []string{url, other} {
		_, err := r.Resolve(ctx, u, Ref{}, nil, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(r.Requests()).To(Equal(int64(2)))

	// The sender names it without ".git" and with an upper-case host.
	n := r.Invalidate(upperHost(url[:len(url)-len(".git")]))
	g.Expect(n).To(Equal(1))
	c2 := srv.Commit(t, "app", "main", map[string]string{"a": "2"}, "2")
	rev, err := r.Resolve(ctx, url, Ref{}, nil, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev.Commit).To(Equal(c2))
	_, err = r.Resolve(ctx, other, Ref{}, nil, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Requests()).To(Equal(int64(3)), "the other repository's listing is kept")
}

func upperHost(u string) string {
	return "HTTP://" + u[len("http://"):]
}
