package stack

import (
	"net/url"
	"regexp"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// claimOf is the owner a Stack writes in its Pulumi stack's tag: its namespace
// and name, not its UID, so that a Stack deleted and created again (GitOps
// does) takes its own stack back.
func claimOf(stack *v1alpha1.Stack) string {
	return stack.Namespace + "/" + stack.Name
}

// claimedError makes the second Stack on one Pulumi stack Stalled, naming the
// first and saying what to do.
func claimedError(stack *v1alpha1.Stack, in *inputs, owner string) *StallingError {
	name := stack.GetStackName()
	return stalling(v1alpha1.StackClaimedReason,
		"stack %s in backend %s belongs to Stack %s (stack tag %s): two Stacks must not share one Pulumi stack, "+
			"so nothing was run. Give this Stack its own spec.stackName or spec.backend; or, if %s no longer uses the stack, "+
			"release it with `pulumi stack tag rm %s --stack %s` and request a reconcile",
		name, safeBackendURL(in.Backend), owner, runner.OwnerTag, owner, runner.OwnerTag, name)
}

// currentStack is the Pulumi stack the Stack's spec names now.
func currentStack(stack *v1alpha1.Stack, in *inputs) *v1alpha1.AppliedStack {
	return &v1alpha1.AppliedStack{Backend: safeBackendURL(in.Backend), StackName: stack.GetStackName()}
}

// claimHeld says that this Stack applied the stack its spec names now: an
// up succeeded there, after the runner had claimed it.
func claimHeld(stack *v1alpha1.Stack, in *inputs) bool {
	applied := stack.Status.AppliedStack
	return applied != nil && *applied == *currentStack(stack, in)
}

// stackChanged refuses to act on a Stack whose spec now names another Pulumi
// stack than the one it applied to: an up would start an empty stack beside the
// old one (creating everything twice), a destroy would miss the old one.
func stackChanged(stack *v1alpha1.Stack, in *inputs) error {
	applied := stack.Status.AppliedStack
	if applied == nil {
		return nil
	}
	now := currentStack(stack, in)
	if *now == *applied {
		return nil
	}
	return stalling(v1alpha1.StackChangedReason,
		"this Stack applied to stack %s in backend %s, and its spec now names stack %s in backend %s; the state does not move by itself. "+
			"Revert spec.backend/spec.stackName; or move the state to the new stack first (`pulumi stack export` from the old one and "+
			"`pulumi stack import` into the new one, or `pulumi stack rename` within one backend), then delete and recreate this Stack "+
			"(with destroyOnDelete false, deleting it leaves the resources alone)",
		applied.StackName, applied.Backend, now.StackName, now.Backend)
}

// secretParam matches query parameters that carry credentials (postgres
// password, Azure SAS signature, access keys, tokens).
var secretParam = regexp.MustCompile(`(?i)pass|secret|token|sig|key|credential|auth`)

// safeBackendURL is a backend URL fit for status, events and logs: without
// user info and without query parameters that may carry credentials.
func safeBackendURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable backend URL)"
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretParam.MatchString(k) {
				q.Del(k)
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
