package stack

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// previewRequests reads a Stack's preview request annotations, by number.
// A value that is not a request is reported in bad (its key), so that it
// can be removed rather than read again at every reconcile.
func previewRequests(stack *v1alpha1.Stack) (reqs []v1alpha1.PreviewRequest, bad []string) {
	for key, value := range stack.Annotations {
		suffix, ok := strings.CutPrefix(key, v1alpha1.PreviewRequestAnnotationPrefix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(suffix, 10, 64)
		var req v1alpha1.PreviewRequest
		if err != nil || json.Unmarshal([]byte(value), &req) != nil || req.Number != n || n <= 0 ||
			(!req.Closed && (!validHead(req.Head) || req.Base == "")) {
			bad = append(bad, key)
			continue
		}
		reqs = append(reqs, req)
	}
	slices.SortFunc(reqs, func(a, b v1alpha1.PreviewRequest) int { return int(a.Number - b.Number) })
	slices.Sort(bad)
	return reqs, bad
}

// validHead is a commit hash in hex: full (SHA-1 or SHA-256), or
// abbreviated to at least 7 digits, as Bitbucket's events and listings give
// it (previewOne completes it from the pull request's branch).
func validHead(h string) bool {
	if len(h) < 7 || len(h) > 64 {
		return false
	}
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func previewAnnotation(number int64) string {
	return v1alpha1.PreviewRequestAnnotationPrefix + strconv.FormatInt(number, 10)
}

// previewEntry is the status entry of pull request number, or nil.
func previewEntry(stack *v1alpha1.Stack, number int64) *v1alpha1.PullRequestPreview {
	for i := range stack.Status.Previews {
		if stack.Status.Previews[i].Number == number {
			return &stack.Status.Previews[i]
		}
	}
	return nil
}

// setPreviewEntry puts e in status.previews in place of the entry of its
// number, kept in order of number and within MaxPreviews (the lowest
// numbers, the oldest pull requests, go first).
func setPreviewEntry(stack *v1alpha1.Stack, e v1alpha1.PullRequestPreview) {
	list := slices.DeleteFunc(stack.Status.Previews, func(p v1alpha1.PullRequestPreview) bool { return p.Number == e.Number })
	list = append(list, e)
	slices.SortFunc(list, func(a, b v1alpha1.PullRequestPreview) int { return int(a.Number - b.Number) })
	if len(list) > v1alpha1.MaxPreviews {
		list = list[len(list)-v1alpha1.MaxPreviews:]
	}
	stack.Status.Previews = list
}

// dropPreviewEntry removes the entry of number.
func dropPreviewEntry(stack *v1alpha1.Stack, number int64) {
	stack.Status.Previews = slices.DeleteFunc(stack.Status.Previews, func(p v1alpha1.PullRequestPreview) bool { return p.Number == number })
	if len(stack.Status.Previews) == 0 {
		stack.Status.Previews = nil
	}
}

// previewDone reports whether req's head has been previewed to an end that
// needs nothing more: the same head succeeded, failed, or was found not to
// touch the program; a fork's still waits for its label.
func previewDone(e *v1alpha1.PullRequestPreview, req v1alpha1.PreviewRequest, forkLabel string) bool {
	if e == nil || !sameHead(e.Head, req.Head) {
		return false
	}
	switch e.Phase {
	case v1alpha1.PreviewSucceeded, v1alpha1.PreviewFailed, v1alpha1.PreviewUnaffected:
		return true
	case v1alpha1.PreviewAwaitingLabel:
		return !forkAllowed(req, forkLabel)
	}
	return false
}

// sameHead: a and b name one commit, one of them maybe abbreviated.
func sameHead(a, b string) bool {
	if len(a) < 7 || len(b) < 7 {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// forkAllowed: a pull request from the same repository, or from a fork
// that carries the label.
func forkAllowed(req v1alpha1.PreviewRequest, label string) bool {
	return !req.Fork || slices.Contains(req.Labels, label)
}

func forkLabelOf(p *v1alpha1.Previews) string {
	if p == nil || p.ForkLabel == "" {
		return v1alpha1.DefaultForkLabel
	}
	return p.ForkLabel
}
