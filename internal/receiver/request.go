package receiver

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// Invalidator drops a resolver's cached listing of a repository: the git
// Resolver's Invalidate.
type Invalidator interface {
	Invalidate(url string) int
}

// Requester asks the Stacks an event is about to reconcile now.
type Requester struct {
	Client client.Client
	// Reader, when set, lists the Stacks instead of Client: the API server
	// itself, so that a push reaches the matching Stacks of every shard,
	// not only those in this controller's cache (docs/guide/sharding.md).
	Reader client.Reader
	// Git, when set, has its ls-remote cache of each pushed repository
	// invalidated before the Stacks are asked.
	Git Invalidator
	Now func() time.Time
}

// Request patches the reconcile-request annotation of every Stack in t's
// namespace (and selector) that ev matches, and returns how many.
func (q *Requester) Request(ctx context.Context, t *Target, ev Event) (int, error) {
	var stacks v1alpha1.StackList
	opts := []client.ListOption{client.InNamespace(t.Key.Namespace)}
	if t.Selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: t.Selector})
	}
	var reader client.Reader = q.Client
	if q.Reader != nil {
		reader = q.Reader
	}
	if err := reader.List(ctx, &stacks, opts...); err != nil {
		return 0, fmt.Errorf("list the Stacks of namespace %s: %w", t.Key.Namespace, err)
	}
	if ev.PullRequest != nil {
		return q.requestPreviews(ctx, stacks.Items, ev)
	}
	var matched []*v1alpha1.Stack
	invalidated := map[string]bool{}
	for i := range stacks.Items {
		st := &stacks.Items[i]
		if !Matches(st, ev) {
			continue
		}
		matched = append(matched, st)
		if g := st.Spec.Source.Git; g != nil && q.Git != nil {
			if n := git.NormalizeURL(g.URL); n != "" && !invalidated[n] {
				invalidated[n] = true
				q.Git.Invalidate(g.URL)
			}
		}
	}
	now := time.Now
	if q.Now != nil {
		now = q.Now
	}
	// One value for all: the resolver shares one ls-remote among the Stacks
	// asked at the same time (git.FetchedAfter).
	stamp := now().UTC().Format(time.RFC3339Nano)
	for _, st := range matched {
		patch := client.MergeFrom(st.DeepCopy())
		if st.Annotations == nil {
			st.Annotations = map[string]string{}
		}
		st.Annotations[v1alpha1.ReconcileRequestAnnotation] = stamp
		if err := q.Client.Patch(ctx, st, patch); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("request a reconcile of Stack %s/%s: %w", st.Namespace, st.Name, err)
		}
	}
	return len(matched), nil
}
