package stack

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// Review stacks (spec.previews.reviewStacks): a pull request's head applied
// to a Pulumi stack of its own, beside the Stack's, with the Stack's inputs
// and identity, its outputs in objects of their own. The Stack is its
// owner: it keeps the finalizer ReviewStackFinalizer while one exists, so
// that none outlives it.

// reviewStackOf is the Stack as its review stack for pull request number:
// the stack name and the outputs objects suffixed "-pr-<number>".
func reviewStackOf(stack *v1alpha1.Stack, number int64) *v1alpha1.Stack {
	s := stack.DeepCopy()
	suffix := fmt.Sprintf("-pr-%d", number)
	s.Spec.StackName = stack.GetStackName() + suffix
	if o := s.Spec.Outputs; o != nil {
		if o.SecretName != "" {
			o.SecretName += suffix
		}
		if o.ConfigMapName != "" {
			o.ConfigMapName += suffix
		}
	}
	return s
}

func maxReviewStacks(p *v1alpha1.Previews) int {
	if p == nil || p.MaxReviewStacks <= 0 {
		return v1alpha1.DefaultMaxReviewStacks
	}
	return int(p.MaxReviewStacks)
}

// reviewStacksInUse counts the review stacks of stack but pull request
// number's.
func reviewStacksInUse(stack *v1alpha1.Stack, number int64) int {
	n := 0
	for _, e := range stack.Status.Previews {
		if e.Number != number && e.ReviewStack != nil && e.ReviewStack.Phase != v1alpha1.PreviewSkipped {
			n++
		}
	}
	return n
}

// applyReviewStack applies the pull request's head (art, the tree the
// preview ran) to its review stack, unless the cap is reached, and
// publishes its outputs. It returns the review stack's status.
func (r *PreviewReconciler) applyReviewStack(ctx context.Context, stack *v1alpha1.Stack, q v1alpha1.PreviewRequest, prev *v1alpha1.ReviewStack) *v1alpha1.ReviewStack {
	rs := reviewStackOf(stack, q.Number)
	out := &v1alpha1.ReviewStack{Name: rs.GetStackName(), Phase: v1alpha1.PreviewFailed}
	if prev != nil {
		out.Head = prev.Head
	}
	if (prev == nil || prev.Phase == v1alpha1.PreviewSkipped) && reviewStacksInUse(stack, q.Number) >= maxReviewStacks(stack.Spec.Previews) {
		out.Phase, out.Head = v1alpha1.PreviewSkipped, ""
		out.Message = fmt.Sprintf("no review stack: %d exist, the most spec.previews.maxReviewStacks allows", maxReviewStacks(stack.Spec.Previews))
		return out
	}
	if err := r.addFinalizer(ctx, stack); err != nil {
		out.Message = cutUTF8(err.Error(), 2000)
		return out
	}
	kind := r.gitKind()
	in, err := r.inputsResolver().resolve(ctx, rs)
	if err != nil {
		out.Message = cutUTF8(fmt.Sprintf("the Stack's inputs: %v", err), 2000)
		return out
	}
	art, err := kind.FetchPullRequest(ctx, rs, q.Ref, q.Head)
	if err != nil {
		out.Message = cutUTF8(scrub(err.Error(), in.Secrets), 2000)
		return out
	}
	res := r.reviewStackOp(ctx, rs, in, art, runner.OpUp, reviewRevision(q.Number, q.Head))
	if res == nil {
		out.Message = "the controller stopped; the next one applies it again"
		return out
	}
	if res.Outcome != runner.OutcomeSucceeded {
		out.Message = cutUTF8("up failed: "+scrub(res.Message, in.Secrets), 2000)
		return out
	}
	if rs.Spec.Outputs != nil {
		if err := r.writeOutputs(ctx, rs, res.Outputs); err != nil {
			out.Message = cutUTF8(fmt.Sprintf("applied, but its outputs were not published: %v", err), 2000)
			return out
		}
	}
	out.Phase, out.Head = v1alpha1.PreviewSucceeded, q.Head
	out.Message = fmt.Sprintf("applied at %s: %s", short(q.Head), summaryLine(res))
	return out
}

// destroyReviewStack destroys pull request number's review stack, removes
// it from the backend and deletes its outputs objects. The program
// destroyed with is the Stack's applied one when there is one: a destroy
// needs the program's project, and its resources are in the state.
func (r *PreviewReconciler) destroyReviewStack(ctx context.Context, stack *v1alpha1.Stack, number int64) error {
	rs := reviewStackOf(stack, number)
	in, err := r.inputsResolver().resolve(ctx, rs)
	if err != nil {
		return fmt.Errorf("destroy review stack %s: the Stack's inputs: %w", rs.GetStackName(), err)
	}
	art, err := r.reviewStackProgram(ctx, stack)
	if err != nil {
		return fmt.Errorf("destroy review stack %s: %w", rs.GetStackName(), err)
	}
	res := r.reviewStackOp(ctx, rs, in, art, runner.OpDestroy, "")
	if res == nil {
		return errors.New("the controller stops")
	}
	if res.Outcome != runner.OutcomeSucceeded {
		return fmt.Errorf("destroy review stack %s: %s", rs.GetStackName(), scrub(res.Message, in.Secrets))
	}
	if o := rs.Spec.Outputs; o != nil {
		for _, obj := range []client.Object{
			&corev1.Secret{}, &corev1.ConfigMap{},
		} {
			name := o.SecretName
			if _, ok := obj.(*corev1.ConfigMap); ok {
				name = o.ConfigMapName
			}
			if name == "" {
				continue
			}
			obj.SetNamespace(stack.Namespace)
			obj.SetName(name)
			if err := r.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete the outputs of review stack %s: %w", rs.GetStackName(), err)
			}
		}
	}
	r.recordf(stack, corev1.EventTypeNormal, "ReviewStackDestroyed", "preview", "review stack %s of pull request %d destroyed and removed", rs.GetStackName(), number)
	return nil
}

// reviewStackProgram is a tree to destroy a review stack with: the Stack's
// last applied program, else its last attempted one.
func (r *PreviewReconciler) reviewStackProgram(ctx context.Context, stack *v1alpha1.Stack) (artifact.Artifact, error) {
	for _, ref := range []*v1alpha1.ArtifactReference{stack.Status.LastAppliedArtifact, stack.Status.LastAttemptedArtifact} {
		if ref != nil {
			return r.programAt(ctx, stack, *ref)
		}
	}
	return artifact.Artifact{}, errors.New("the Stack has no program to destroy it with yet")
}

// reviewStackOp runs an up or a destroy of a review stack through the
// Stack's executor. It is no operation of the Stack: its history and
// currentOperation are left alone.
func (r *PreviewReconciler) reviewStackOp(ctx context.Context, rs *v1alpha1.Stack, in *inputs, art artifact.Artifact, typ runner.OperationType, revision string) *runner.Result {
	st := &reconcileState{stack: rs, revision: revision, inputs: in, artifact: art}
	return r.execute(ctx, st, newOperationID(typ), typ, art, opOptions{reviewStack: true, removeStack: typ == runner.OpDestroy})
}

// addFinalizer keeps the Stack until its review stacks are gone.
func (r *PreviewReconciler) addFinalizer(ctx context.Context, stack *v1alpha1.Stack) error {
	if controllerutil.ContainsFinalizer(stack, v1alpha1.ReviewStackFinalizer) {
		return nil
	}
	before := stack.DeepCopy()
	controllerutil.AddFinalizer(stack, v1alpha1.ReviewStackFinalizer)
	if err := r.Patch(ctx, stack, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add the finalizer %s: %w", v1alpha1.ReviewStackFinalizer, err)
	}
	return nil
}

// dropFinalizer lets the Stack go once no review stack is left.
func (r *PreviewReconciler) dropFinalizer(ctx context.Context, stack *v1alpha1.Stack) error {
	if !controllerutil.ContainsFinalizer(stack, v1alpha1.ReviewStackFinalizer) {
		return nil
	}
	for _, e := range stack.Status.Previews {
		if e.ReviewStack != nil && e.ReviewStack.Phase != v1alpha1.PreviewSkipped {
			return nil
		}
	}
	before := stack.DeepCopy()
	controllerutil.RemoveFinalizer(stack, v1alpha1.ReviewStackFinalizer)
	if err := r.Patch(ctx, stack, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove the finalizer %s: %w", v1alpha1.ReviewStackFinalizer, err)
	}
	return nil
}
