package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// approveFieldManager is the field manager of the approval patch: the
// controller records the annotation's last writer (from managedFields) as
// the record's approvedBy.
const approveFieldManager = "stackpilot"

// approvePollInterval is how often `approve --wait` reads the Stack.
var approvePollInterval = time.Second

type approveOptions struct {
	plan    string
	wait    bool
	timeout time.Duration
}

func (c *cli) newApproveCmd() *cobra.Command {
	opts := approveOptions{timeout: 10 * time.Minute}
	cmd := &cobra.Command{
		Use:   "approve STACK",
		Short: "Approve the Stack's pending plan so that the controller applies it",
		Long: `Approves the plan in the Stack's status.pendingPlan: sets the annotation
stackpilot.dev/approve to its id (a merge patch, field manager "stackpilot",
which the controller records as the approver). The controller then applies
exactly that plan; if the source or the inputs changed meanwhile, a new plan
replaces it and the approval applies nothing.

--plan ID approves only that plan: it refuses when ID is not the pending plan
any more (review the new one with ` + "`stackpilot plan`" + `). Without --plan it
approves whatever plan is pending now. It refuses a Stack whose approval mode
is Auto (nothing to approve) or PreviewOnly (never applied).

With --wait it waits until the controller ran the up of that plan and
reports its outcome.

Exit codes:
  0  approved (with --wait: and applied)
  1  error: refused (stale --plan, mode Auto or PreviewOnly), the Stack cannot
     be read or patched, the up failed, the plan was replaced, or --timeout
  2  usage error
  3  the Stack has no pending plan (the message says why)`,
		Example: `  stackpilot plan web -n infra
  stackpilot approve web -n infra --plan 5f1c2a9e
  stackpilot approve web -n infra --plan 5f1c2a9e --wait --timeout 20m`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.wait && opts.timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration such as 10m", opts.timeout)
			}
			if cmd.Flags().Changed("plan") && opts.plan == "" {
				return usageErrorf("--plan needs a plan id (see `stackpilot plan %s`)", args[0])
			}
			return c.withStack(args[0], func(ctx context.Context, g *stackGetter, s *v1alpha1.Stack) error {
				return c.approve(ctx, g, s, opts)
			})
		},
	}
	cmd.Flags().StringVar(&opts.plan, "plan", "", "Approve only this plan id (refused when it is not the pending plan).")
	_ = cmd.RegisterFlagCompletionFunc("plan", c.completePendingPlan)
	cmd.Flags().BoolVar(&opts.wait, "wait", false, "Wait until the controller applied the plan and report the outcome.")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", opts.timeout, "With --wait: how long to wait for the apply.")
	return cmd
}

func (c *cli) approve(ctx context.Context, g *stackGetter, s *v1alpha1.Stack, opts approveOptions) error {
	name := s.Name
	id, err := approvable(s, opts.plan)
	if err != nil {
		return err
	}
	verb := "Approved"
	if s.Annotations[v1alpha1.ApproveAnnotation] == id {
		// Nothing to write: the approval and its recorded approver stand.
		verb = "Already approved:"
	} else if s, err = c.writeApproval(ctx, g, s, id); err != nil {
		return err
	}
	p := s.Status.PendingPlan
	fmt.Fprintf(c.stdout, "%s plan %s of Stack %s/%s (revision %s: %s).\n", verb, id, s.Namespace, s.Name, p.Revision, changesLine(p.Changes))
	if !opts.wait {
		fmt.Fprintf(c.stderr, "The controller applies it at its next reconcile; follow it with `kubectl get stack %s -n %s -w`, or run approve with --wait\n", s.Name, s.Namespace)
		return nil
	}
	fmt.Fprintf(c.stderr, "Waiting up to %s for the controller to apply it...\n", opts.timeout)
	s, rec, err := waitApplied(ctx, g, name, id, opts.timeout)
	if err != nil {
		return err
	}
	return c.reportApplied(s, id, rec)
}

// approvable is the id to approve, or why s has none that may be approved:
// exit 3 without a pending plan; an error for mode Auto or PreviewOnly, or
// when want (--plan) is not the pending plan.
func approvable(s *v1alpha1.Stack, want string) (string, error) {
	mode := s.GetApprovalMode()
	if mode == v1alpha1.ApprovalAuto {
		return "", fmt.Errorf("the Stack %s/%s has nothing to approve: its approval mode is Auto, so the controller applies changes at once (set spec.approval.mode: Manual to approve plans first)", s.Namespace, s.Name)
	}
	p := s.Status.PendingPlan
	if p == nil {
		return "", noPendingPlan(s)
	}
	if mode == v1alpha1.ApprovalPreviewOnly {
		return "", fmt.Errorf("the Stack %s/%s is PreviewOnly: its plan %s is shown, never applied, so it cannot be approved (set spec.approval.mode: Manual to apply approved plans)", s.Namespace, s.Name, p.ID)
	}
	if want != "" && want != p.ID {
		return "", fmt.Errorf("plan %s is not the pending plan (%s is, made at revision %s at %s): run `stackpilot plan %s -n %s` to review it, then approve it with --plan %s",
			want, p.ID, p.Revision, p.CreatedAt.UTC().Format(time.RFC3339), s.Name, s.Namespace, p.ID)
	}
	return p.ID, nil
}

// writeApproval sets the annotation to id with a merge patch carrying the
// resourceVersion read: if the Stack changed since (a new plan may have
// replaced id), the API server refuses it, and the Stack is read and checked
// again before the next try. Other keys and other writers are untouched.
func (c *cli) writeApproval(ctx context.Context, g *stackGetter, s *v1alpha1.Stack, id string) (*v1alpha1.Stack, error) {
	for attempt := 0; ; attempt++ {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": s.ResourceVersion,
			"annotations":     map[string]string{v1alpha1.ApproveAnnotation: id},
		}})
		if err != nil {
			return nil, err
		}
		err = g.cl.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(approveFieldManager))
		if err == nil {
			return s, nil
		}
		switch {
		case apierrors.IsConflict(err) && attempt >= 4:
			return nil, fmt.Errorf("the Stack %s/%s changed at each of %d tries to approve it: run approve again", s.Namespace, s.Name, attempt+1)
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			return nil, g.explain(ctx, s.Name, err)
		case !apierrors.IsConflict(err):
			return nil, fmt.Errorf("patching Stack %s in namespace %s: %w", s.Name, s.Namespace, err)
		}
		// The controller wrote the Stack meanwhile: check that id is still
		// the pending plan, then try again on the new version.
		if s, err = g.get(ctx, s.Name); err != nil {
			return nil, err
		}
		if _, err := approvable(s, id); err != nil {
			return nil, fmt.Errorf("the Stack changed while approving: %w", err)
		}
	}
}

// waitApplied reads the Stack until its history holds the finished up of
// plan id, and returns both. It gives up when the plan was replaced by
// another before any up of it ran.
func waitApplied(ctx context.Context, g *stackGetter, name, id string, timeout time.Duration) (*v1alpha1.Stack, *v1alpha1.OperationRecord, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(approvePollInterval)
	defer tick.Stop()
	for {
		s, err := g.get(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("interrupted before the controller applied plan %s (it stays approved)", id)
			}
			return nil, nil, err
		}
		if rec := upOfPlan(s, id); rec != nil {
			return s, rec, nil
		}
		if p := s.Status.PendingPlan; p != nil && p.ID != id {
			return nil, nil, fmt.Errorf("plan %s was replaced by plan %s (revision %s) before it was applied, so the approval applies nothing: review the new one with `stackpilot plan %s -n %s`",
				id, p.ID, p.Revision, s.Name, s.Namespace)
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("interrupted before the controller applied plan %s (it stays approved)", id)
		case <-deadline.C:
			return nil, nil, approveTimeout(s, id, timeout)
		case <-tick.C:
		}
	}
}

// upOfPlan is the finished up that applied plan id, newest first. The
// preview that made the plan carries its id too; it is not the apply.
func upOfPlan(s *v1alpha1.Stack, id string) *v1alpha1.OperationRecord {
	for i := range s.Status.History {
		r := &s.Status.History[i]
		if r.Plan == id && r.Type == v1alpha1.OperationUp && r.FinishedAt != nil && r.Outcome != v1alpha1.OutcomeRunning {
			return r
		}
	}
	return nil
}

func approveTimeout(s *v1alpha1.Stack, id string, timeout time.Duration) error {
	why := fmt.Sprintf("is stackpilot-controller running and watching namespace %s? (plan %s stays approved)", s.Namespace, id)
	if op := s.Status.CurrentOperation; op != nil {
		why = fmt.Sprintf("the controller is running %s %s; wait longer with --timeout (plan %s stays approved)", op.Type, op.ID, id)
	}
	return fmt.Errorf("%w after %s waiting for the controller to apply plan %s: %s", errTimeout, timeout, id, why)
}

// reportApplied prints a successful up of the plan, or fails with its
// message and the plan made since, if any (a plan no longer valid is made
// again).
func (c *cli) reportApplied(s *v1alpha1.Stack, id string, rec *v1alpha1.OperationRecord) error {
	by := ""
	if rec.ApprovedBy != "" {
		by = ", approved by " + rec.ApprovedBy
	}
	if rec.Outcome != v1alpha1.OutcomeSucceeded {
		msg := fmt.Sprintf("the up of plan %s on Stack %s/%s %s (%s %s%s)", id, s.Namespace, s.Name, rec.Outcome, rec.Type, rec.ID, by)
		if rec.Reason != "" {
			msg += ", " + rec.Reason
		}
		if rec.Message != "" {
			msg += ": " + rec.Message
		}
		if p := s.Status.PendingPlan; p != nil && p.ID != id {
			msg += fmt.Sprintf("; plan %s is pending now: review it with `stackpilot plan %s -n %s`", p.ID, s.Name, s.Namespace)
		}
		return fmt.Errorf("%s", msg)
	}
	changed := "no changes"
	if rec.Changes != nil {
		changed = changesLine(*rec.Changes)
	}
	fmt.Fprintf(c.stdout, "Applied plan %s to Stack %s/%s at revision %s: %s (%s %s%s).\n", id, s.Namespace, s.Name, orDash(rec.Revision), changed, rec.Type, rec.ID, by)
	return nil
}

// completePendingPlan completes --plan with the Stack's pending plan id.
func (c *cli) completePendingPlan(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) != 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	g, err := c.stackGetter()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := g.get(ctx, args[0])
	if err != nil || s.Status.PendingPlan == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	p := s.Status.PendingPlan
	return []string{p.ID + "\tat " + p.Revision + ": " + changesLine(p.Changes)}, cobra.ShellCompDirectiveNoFileComp
}
