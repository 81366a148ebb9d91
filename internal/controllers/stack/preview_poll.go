package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/forge"
)

// poll lists the open pull requests into the Stack's branch through the
// forge (spec.previews.pollInterval, for repositories that cannot send
// webhooks) and makes the Stack's preview requests say what it found: one
// request per open pull request, at its head, and every other request
// closed. The requests are the annotations a Receiver writes, so both ways
// meet in one place. It lists at most once per interval.
func (r *PreviewReconciler) poll(ctx context.Context, stack *v1alpha1.Stack, reqs []v1alpha1.PreviewRequest) ([]v1alpha1.PreviewRequest, error) {
	interval := stack.Spec.Previews.PollInterval.Duration
	if last, ok := r.polled.Load(stack.UID); ok && r.now().Sub(last.(time.Time)) < interval {
		return reqs, nil
	}
	base := followedBranch(stack)
	if base == "" {
		return reqs, fmt.Errorf("the Stack follows no branch yet (no revision resolved): nothing to list")
	}
	fc, err := r.forgeClient(ctx, stack)
	if err != nil {
		return reqs, err
	}
	open, err := fc.OpenPullRequests(ctx, base)
	if err != nil {
		return reqs, err
	}
	r.polled.Store(stack.UID, r.now())
	byNumber := map[int64]v1alpha1.PreviewRequest{}
	for _, q := range reqs {
		byNumber[q.Number] = q
	}
	var out []v1alpha1.PreviewRequest
	set := map[string]any{}
	seen := map[int64]bool{}
	for _, pr := range open {
		if !validHead(pr.Head) {
			continue
		}
		seen[pr.Number] = true
		q := v1alpha1.PreviewRequest{Number: pr.Number, Head: pr.Head, Ref: pr.Ref, Base: pr.Base, Fork: pr.Fork,
			Labels: forge.BoundLabels(pr.Labels), URL: cutUTF8(pr.URL, 512)}
		out = append(out, q)
		if old, ok := byNumber[q.Number]; !ok || !sameRequest(old, q) {
			set[previewAnnotation(q.Number)] = mustJSON(q)
		}
	}
	for _, q := range reqs {
		if !seen[q.Number] {
			q.Closed = true
			out = append(out, q)
		}
	}
	if len(set) > 0 {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
		if err != nil {
			return reqs, err
		}
		if err := r.Patch(ctx, stack, client.RawPatch("application/merge-patch+json", body)); err != nil {
			return reqs, fmt.Errorf("record the open pull requests: %w", err)
		}
	}
	return out, nil
}

func sameRequest(a, b v1alpha1.PreviewRequest) bool {
	return mustJSON(a) == mustJSON(b)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
