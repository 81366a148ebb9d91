package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/forge"
	"github.com/stackpilot/stackpilot/internal/preview"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// previewOne previews one pull request's head for stack and posts the
// result: which files it changes decides whether the Stack is concerned at
// all; a fork's waits for its label; then a pending status, the preview
// (runner.Spec.Review: nothing changes in the backend), the comment and the
// final status. It returns the status entry it wrote. An error is a status
// patch that failed (retried by the queue); what the forge or the preview
// answered is in the entry.
func (r *PreviewReconciler) previewOne(ctx context.Context, stack *v1alpha1.Stack, q v1alpha1.PreviewRequest) (v1alpha1.PullRequestPreview, error) {
	prev := previewEntry(stack, q.Number)
	e := v1alpha1.PullRequestPreview{Number: q.Number, Head: q.Head, UpdatedAt: metav1.NewTime(r.now())}
	if prev != nil {
		if prev.Plan != "" && !sameHead(prev.Head, q.Head) {
			// The plan of an older head is no change anyone will merge.
			_ = r.Reviews.Remove(stack.UID, prev.Plan)
		}
		e.CommentID = prev.CommentID
		e.ReviewStack = prev.ReviewStack // destroyed when the pull request closes, whatever comes
		if sameHead(prev.Head, q.Head) && prev.Phase == v1alpha1.PreviewError {
			e.Failures = prev.Failures
		}
	}
	fail := func(err error) (v1alpha1.PullRequestPreview, error) {
		e.Phase, e.Failures = v1alpha1.PreviewError, e.Failures+1
		e.Message = cutUTF8(err.Error(), 2000)
		r.recordf(stack, corev1.EventTypeWarning, "PreviewFailed", "preview", "pull request %d: %s", q.Number, e.Message)
		return e, r.patchPreview(ctx, stack, e)
	}
	if followed := followedBranch(stack); followed != "" && followed != q.Base {
		e.Phase = v1alpha1.PreviewUnaffected
		e.Message = fmt.Sprintf("pull request %d merges into %s; this Stack follows %s", q.Number, q.Base, followed)
		return e, r.patchPreview(ctx, stack, e)
	}
	fc, err := r.forgeClient(ctx, stack)
	if err != nil {
		return fail(err)
	}
	if len(q.Head) < 40 {
		// Bitbucket abbreviates: the branch that holds the head says
		// which commit it is, while it still points there.
		full, err := r.completeHead(ctx, stack, q)
		if err != nil {
			return fail(err)
		}
		q.Head, e.Head = full, full
	}
	files, complete, err := fc.ChangedFiles(ctx, q.Number)
	if err != nil {
		return fail(fmt.Errorf("list the files pull request %d changes: %w", q.Number, err))
	}
	if complete && !forge.Touches(files, stack.Spec.Source.Dir, programIncludes(stack)) {
		e.Phase = v1alpha1.PreviewUnaffected
		e.Message = fmt.Sprintf("pull request %d changes none of %s", q.Number, programPaths(stack))
		return e, r.patchPreview(ctx, stack, e)
	}
	ctxName := preview.Context(stack.Namespace, stack.Name)
	if label := forkLabelOf(stack.Spec.Previews); !forkAllowed(q, label) {
		e.Phase = v1alpha1.PreviewAwaitingLabel
		e.Message = fmt.Sprintf("pull request %d comes from a fork: its program runs once someone with write access adds the label %q", q.Number, label)
		if err := fc.SetStatus(ctx, q.Head, forge.Status{State: forge.StatePending, Context: ctxName,
			Description: fmt.Sprintf("from a fork: waits for the label %s", label)}); err != nil {
			return fail(fmt.Errorf("set the status of %s: %w", short(q.Head), err))
		}
		return e, r.patchPreview(ctx, stack, e)
	}
	if err := fc.SetStatus(ctx, q.Head, forge.Status{State: forge.StatePending, Context: ctxName, Description: "previewing"}); err != nil {
		return fail(fmt.Errorf("set the status of %s: %w", short(q.Head), err))
	}
	e.Phase, e.Message = v1alpha1.PreviewRunning, fmt.Sprintf("previewing %s", short(q.Head))
	e.Operation = newOperationID(runner.OpPreview)
	if err := r.patchPreview(ctx, stack, e); err != nil {
		return e, err
	}

	// The preview's own context: a newer push to this pull request, or
	// its closing, cancels it (previewEvents).
	opCtx, cancel := context.WithCancel(ctx)
	key := previewKey{uid: stack.UID, number: q.Number}
	r.running.start(key, q.Head, cancel)
	res, msg, planID := r.runReview(opCtx, stack, pullRequestTarget(q), e.Operation)
	e.Plan = planID
	r.running.end(key)
	// Cancelled at any step (the fetch, the runner): whatever the step
	// made of it, it is no result of this head's.
	superseded := opCtx.Err() != nil
	cancel()
	if superseded && ctx.Err() == nil {
		// Outdated: the next reconcile previews what is asked now. The
		// head's pending status is ended, nothing else is posted for it.
		log.FromContext(ctx).Info("preview cancelled by a newer request", "pullRequest", q.Number, "head", q.Head)
		if err := fc.SetStatus(ctx, q.Head, forge.Status{State: forge.StateCancelled, Context: ctxName,
			Description: "cancelled: a newer push or the pull request's closing superseded it"}); err != nil {
			log.FromContext(ctx).Info("could not end the status of a cancelled preview", "error", err.Error())
		}
		return e, nil
	}
	if ctx.Err() != nil {
		return e, ctx.Err() // the controller stops; the next one previews again
	}

	rep := preview.Report{Namespace: stack.Namespace, Name: stack.Name, Head: q.Head, Result: res, Message: msg,
		PlanID: planID, PlanURL: preview.PlanURL(r.PlanURLTemplate, stack.Namespace, stack.Name, planID),
		LogsHint: fmt.Sprintf("stackpilot logs %s -n %s --operation %s", stack.Name, stack.Namespace, e.Operation)}
	if stack.Spec.Previews.ReviewStacks && rep.Succeeded() {
		var was *v1alpha1.ReviewStack
		if prev != nil {
			was = prev.ReviewStack
		}
		e.ReviewStack = r.applyReviewStack(ctx, stack, q, was)
		rep.ReviewStack = reviewStackLine(e.ReviewStack)
	}
	id, err := fc.UpsertComment(ctx, q.Number, e.CommentID, preview.Marker(stack.Namespace, stack.Name), rep.Comment(fc.MaxCommentSize()))
	if id != "" {
		e.CommentID = id
	}
	if err != nil {
		return fail(fmt.Errorf("comment on pull request %d: %w", q.Number, err))
	}
	state := forge.StateFailure
	if rep.Succeeded() {
		state = forge.StateSuccess
	}
	if err := fc.SetStatus(ctx, q.Head, forge.Status{State: state, Context: ctxName, Description: rep.Description(), TargetURL: rep.PlanURL}); err != nil {
		return fail(fmt.Errorf("set the status of %s: %w", short(q.Head), err))
	}
	e.Failures, e.UpdatedAt = 0, metav1.NewTime(r.now())
	e.Message = cutUTF8(rep.Description(), 2000)
	if rep.Succeeded() {
		e.Phase = v1alpha1.PreviewSucceeded
		c := res.Changes
		e.Changes = &v1alpha1.ChangeSummary{Create: int64(c.Create), Update: int64(c.Update), Replace: int64(c.Replace), Delete: int64(c.Delete)}
		r.recordf(stack, corev1.EventTypeNormal, "PullRequestPreviewed", "preview", "pull request %d at %s: %s", q.Number, short(q.Head), e.Message)
	} else {
		e.Phase = v1alpha1.PreviewFailed
		r.recordf(stack, corev1.EventTypeWarning, "PullRequestPreviewFailed", "preview", "pull request %d at %s: %s", q.Number, short(q.Head), e.Message)
	}
	return e, r.patchPreview(ctx, stack, e)
}

// reviewTarget is one commit to preview for review: a pull request's head
// or a revision asked for on demand.
type reviewTarget struct {
	ref, head string // the reference that holds head, and head
	revision  string // its name in plans and messages
	planID    string // the plan to keep
	what      string // for messages: "pull request 12", "revision main"
}

func pullRequestTarget(q v1alpha1.PreviewRequest) reviewTarget {
	return reviewTarget{ref: q.Ref, head: q.Head, revision: reviewRevision(q.Number, q.Head),
		planID: reviewPlanID(q.Number, q.Head), what: fmt.Sprintf("pull request %d", q.Number)}
}

// runReview fetches the target's commit and previews it with the Stack's
// current inputs, identity and executor (runner.Spec.Review: nothing
// changes in the backend), saving Pulumi's update plan in the review store
// as the target's plan. It returns the result (nil when the controller
// stops mid-way), its message with secrets scrubbed, and the id of the
// plan kept ("" when none was).
func (r *PreviewReconciler) runReview(ctx context.Context, stack *v1alpha1.Stack, t reviewTarget, id string) (*runner.Result, string, string) {
	failed := func(err error) (*runner.Result, string, string) {
		return &runner.Result{Outcome: runner.OutcomeFailed, Message: err.Error()}, err.Error(), ""
	}
	kind := r.gitKind()
	if kind == nil {
		return failed(errors.New("this controller has no Git source"))
	}
	in, err := r.inputsResolver().resolve(ctx, stack)
	if err != nil {
		return failed(fmt.Errorf("the Stack's inputs: %w", err))
	}
	art, err := kind.FetchPullRequest(ctx, stack, t.ref, t.head)
	if err != nil {
		return failed(fmt.Errorf("fetch %s of %s: %s", short(t.head), t.what, scrub(err.Error(), in.Secrets)))
	}
	digest, err := programDigest(ctx, r.Artifacts, stack, art)
	if err != nil {
		return failed(fmt.Errorf("%s at %s: %s", t.what, short(t.head), scrub(err.Error(), in.Secrets)))
	}
	st := &reconcileState{
		stack:         stack.DeepCopy(),
		revision:      t.revision,
		inputs:        in,
		artifact:      art,
		programDigest: digest,
	}
	_ = r.Reviews.Remove(stack.UID, t.planID) // a preview of this commit again
	file, err := r.Reviews.Stage(stack.UID, t.planID)
	if err != nil {
		return failed(err)
	}
	pullRequestPreviewRuns.Inc()
	res := r.execute(ctx, st, id, runner.OpPreview, art, opOptions{review: true, plan: file})
	if res == nil || res.Outcome != runner.OutcomeSucceeded {
		// Failed, cancelled (a newer push, the pull request closed) or cut
		// short: no plan, and nothing of one left behind.
		r.Reviews.Discard(stack.UID, t.planID)
	}
	if res == nil {
		return nil, "", ""
	}
	msg := scrub(res.Message, in.Secrets)
	if res.Outcome != runner.OutcomeSucceeded {
		return res, msg, ""
	}
	if err := r.Reviews.Commit(stack.UID, planDocument(st, t.planID, stack.GetApprovalMode(), res)); err != nil {
		log.FromContext(ctx).Error(err, "could not keep the reviewed plan; the up after the merge previews again", "plan", t.planID)
		return res, msg, ""
	}
	return res, msg, t.planID
}

// reviewRevision is how a pull request's head is named in plans and
// messages: "pull/12@sha1:<head>".
func reviewRevision(number int64, head string) string {
	return fmt.Sprintf("pull/%d@sha1:%s", number, head)
}

// reviewPlanID names the plan of pull request number at head.
func reviewPlanID(number int64, head string) string {
	return fmt.Sprintf("review-%d-%s", number, short(head))
}

// forgeClient is the client of spec.previews, its token read from the
// Secret of spec.previews.secretRef through the API server.
func (r *PreviewReconciler) forgeClient(ctx context.Context, stack *v1alpha1.Stack) (forge.Client, error) {
	p := stack.Spec.Previews
	g := stack.Spec.Source.Git
	if g == nil {
		return nil, &forge.ConfigError{Reason: "spec.previews needs a spec.source.git: pull requests are a Git forge's"}
	}
	provider, apiURL, repo := forge.Defaults(g.URL, p.Provider, p.APIURL, p.Repository)
	var sec corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: p.SecretRef.Name}, &sec); err != nil {
		return nil, fmt.Errorf("spec.previews.secretRef: read Secret %s: %w", p.SecretRef.Name, err)
	}
	token := strings.TrimSpace(string(sec.Data[v1alpha1.ForgeTokenKey]))
	return forge.New(forge.Config{Provider: provider, APIURL: apiURL, Repository: repo, Token: token, HTTPClient: r.HTTPClient})
}

// gitKind is the controller's Git source kind.
func (r *PreviewReconciler) gitKind() *git.Kind {
	for _, k := range r.Sources {
		if g, ok := k.(*git.Kind); ok {
			return g
		}
	}
	return nil
}

// followedBranch is the branch the Stack follows: spec.source.git.ref.branch,
// else the branch its last revision was found on (a Stack that follows the
// remote HEAD); "" when neither says.
func followedBranch(stack *v1alpha1.Stack) string {
	g := stack.Spec.Source.Git
	if g == nil {
		return ""
	}
	if g.Ref != nil && g.Ref.Branch != "" {
		return g.Ref.Branch
	}
	if g.Ref != nil && (g.Ref.Tag != "" || g.Ref.SemVer != "") {
		return "" // a tag follower takes no pull request's base
	}
	rev := stack.Status.LastAttemptedRevision
	if name, _, ok := strings.Cut(rev, "@"); ok {
		return name
	}
	return ""
}

func programIncludes(stack *v1alpha1.Stack) []string {
	if g := stack.Spec.Source.Git; g != nil {
		return g.Include
	}
	return nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func (r *PreviewReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reviewStackLine is the review stack's line in the comment.
func reviewStackLine(rs *v1alpha1.ReviewStack) string {
	if rs == nil {
		return ""
	}
	switch rs.Phase {
	case v1alpha1.PreviewSucceeded:
		return fmt.Sprintf("Review stack `%s`: %s.", rs.Name, rs.Message)
	case v1alpha1.PreviewSkipped:
		return fmt.Sprintf("No review stack: %s.", strings.TrimPrefix(rs.Message, "no review stack: "))
	}
	return fmt.Sprintf("Review stack `%s` **failed**: %s", rs.Name, preview.OneLine(rs.Message))
}

// completeHead finds the full commit of an abbreviated head in the
// reference that holds it.
func (r *PreviewReconciler) completeHead(ctx context.Context, stack *v1alpha1.Stack, q v1alpha1.PreviewRequest) (string, error) {
	kind := r.gitKind()
	if kind == nil || stack.Spec.Source.Git == nil {
		return "", errors.New("this controller has no Git source")
	}
	rev, err := kind.ResolveAny(ctx, stack, q.Ref)
	if err != nil {
		return "", fmt.Errorf("pull request %d: find commit %s in %s: %w", q.Number, q.Head, q.Ref, err)
	}
	if !strings.HasPrefix(rev.Commit, q.Head) {
		return "", fmt.Errorf("pull request %d: %s is at %s now, not %s: the next event previews it", q.Number, q.Ref, short(rev.Commit), q.Head)
	}
	return rev.Commit, nil
}
