package receiver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// requestPreviews asks each Stack that previews pull requests of ev's
// repository into ev's base branch to preview (or, once closed, to forget)
// the pull request, by setting its preview request annotation. Whether the
// pull request changes the Stack's program is the controller's to find out
// (it asks the forge which files changed), not the webhook's.
func (q *Requester) requestPreviews(ctx context.Context, stacks []v1alpha1.Stack, ev Event) (int, error) {
	pr := ev.PullRequest
	req := v1alpha1.PreviewRequest{Number: pr.Number, Head: pr.Head, Ref: pr.Ref, Base: pr.Base,
		Fork: pr.Fork, Labels: pr.Labels, Closed: pr.Closed, Merged: pr.Merged, URL: truncate(pr.URL, 512)}
	value, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	key := v1alpha1.PreviewRequestAnnotationPrefix + strconv.FormatInt(pr.Number, 10)
	n := 0
	for i := range stacks {
		st := &stacks[i]
		if !MatchesPullRequest(st, ev) {
			continue
		}
		n++
		if st.Annotations[key] == string(value) {
			continue // a redelivery, or an edit of the title: nothing new to preview
		}
		patch := client.MergeFrom(st.DeepCopy())
		if st.Annotations == nil {
			st.Annotations = map[string]string{}
		}
		st.Annotations[key] = string(value)
		if err := q.Client.Patch(ctx, st, patch); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("request a preview of pull request %d from Stack %s/%s: %w", pr.Number, st.Namespace, st.Name, err)
		}
	}
	return n, nil
}

// MatchesPullRequest reports whether stack previews ev's pull request: it
// has spec.previews enabled, follows a branch of ev's repository, and that
// branch is the pull request's base.
func MatchesPullRequest(stack *v1alpha1.Stack, ev Event) bool {
	p := stack.Spec.Previews
	g := stack.Spec.Source.Git
	if ev.PullRequest == nil || p == nil || !p.Enabled || g == nil || (g.Ref != nil && g.Ref.Commit != "") {
		return false
	}
	base := Event{Repositories: ev.Repositories, Refs: []string{"refs/heads/" + ev.PullRequest.Base}}
	return matchesGit(g, base)
}
