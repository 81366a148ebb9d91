package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

// exitNoPlan is the exit code of `plan` and `approve` when the Stack has no
// pending plan: not a failure, but a script must be able to tell "nothing to
// review or approve" from both success and error (2 is the usage error).
const exitNoPlan = 3

type planOptions struct {
	output     string
	id         string
	controller controllerOptions
}

func (c *cli) newPlanCmd() *cobra.Command {
	opts := planOptions{}
	cmd := &cobra.Command{
		Use:   "plan STACK [--id ID]",
		Short: "Print the Stack's pending plan, like pulumi preview",
		Long: `Prints the plan that waits for approval (spec.approval.mode Manual) or is
only shown (PreviewOnly): the revision it was made at, its id, and every
resource it would change with the paths of the changed properties (never
their values), the way ` + "`pulumi preview`" + ` prints an update.

The full plan comes from the controller (GET /plans/<namespace>/<name>/<id> on
its HTTPS logs address, as ` + "`stackpilot logs`" + ` reads), through the API server's
service proxy to the Service stackpilot-controller in stackpilot-system, port
"logs" (RBAC: get on services/proxy there), or straight from --controller-url.
The CLI presents the kubeconfig user's bearer token (or --token), which the
controller checks: reading a Stack's plans needs get on that Stack. When the
controller cannot be reached or refuses, it prints status.pendingPlan
instead, which lists the first 50 resources, and says why on stderr.

--id prints another plan the controller keeps for the Stack: a pull
request's preview (spec.previews) keeps one, named in status.previews[].plan
and in the comment on the pull request ("review-<number>-<commit>"). It is
read from the controller only.

Exit codes:
  0  the pending plan was printed
  1  error: the Stack cannot be read
  2  usage error
  3  the Stack has no pending plan (the message says why)`,
		Example: `  stackpilot plan web -n infra
  stackpilot plan web -o json | jq '.resources[].urn'
  stackpilot plan web --id review-12-1a2b3c4d5e6f
  stackpilot plan web --controller-url https://localhost:9443 --insecure-skip-tls-verify`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := planFormat(opts.output)
			if err != nil {
				return err
			}
			if _, err := opts.controller.check(); err != nil {
				return err
			}
			return c.withStack(args[0], func(ctx context.Context, _ *stackGetter, s *v1alpha1.Stack) error {
				if opts.id != "" {
					return c.printPlanByID(ctx, opts, format, s)
				}
				if s.Status.PendingPlan == nil {
					return noPendingPlan(s)
				}
				ep, err := c.controllerEndpoint(opts.controller.forStack(s))
				if err != nil {
					return err
				}
				d, omitted := c.fullPlan(ctx, ep, s)
				return c.writePlan(format, s, d, omitted)
			})
		},
	}
	cmd.Flags().StringVarP(&opts.output, "output", "o", "text", "Output format: text (like pulumi preview), json or yaml (the plan document).")
	cmd.Flags().StringVar(&opts.id, "id", "", "Print the plan of this id, not the pending one: a pull request's reviewed plan (status.previews[].plan).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	opts.controller.addFlags(cmd.Flags(), "the plan")
	return cmd
}

func planFormat(s string) (string, error) {
	switch s {
	case "text", "json", "yaml":
		return s, nil
	}
	return "", usageErrorf("-o %q: want text, json or yaml", s)
}

// fullPlan asks the controller for the pending plan's Document; on any
// failure it warns and rebuilds what status.pendingPlan holds, returning how
// many resources that leaves out.
func (c *cli) fullPlan(ctx context.Context, e *endpoint, s *v1alpha1.Stack) (*plan.Document, int64) {
	p := s.Status.PendingPlan
	ctx, cancel := context.WithTimeout(ctx, planFetchTimeout)
	defer cancel()
	d, err := e.fetchPlan(ctx, s.Namespace, s.Name, p.ID)
	if err == nil {
		return d, 0
	}
	d, omitted := plan.FromPendingPlan(s)
	listed := fmt.Sprintf("all %d resource(s)", len(d.Resources))
	if omitted > 0 {
		listed = fmt.Sprintf("the first %d of %d resources", len(d.Resources), p.Total)
	}
	var nf *planNotFoundError
	if errors.As(err, &nf) {
		c.warnf("%v; showing status.pendingPlan instead (%s)", err, listed)
	} else {
		c.warnf("could not read the full plan: %v; showing status.pendingPlan instead (%s)", err, listed)
	}
	return d, omitted
}

func (c *cli) writePlan(format string, s *v1alpha1.Stack, d *plan.Document, omitted int64) error {
	if format != "text" {
		return writeStructured(c.stdout, format, d)
	}
	if err := plan.Render(c.stdout, d, plan.RenderOptions{Colour: useColour(c.stdout), Now: time.Now(), Omitted: omitted}); err != nil {
		return err
	}
	_, err := io.WriteString(c.stdout, "\n"+planHint(s, d.ID)+"\n")
	return err
}

// printPlanByID prints plan opts.id of s, read from the controller.
func (c *cli) printPlanByID(ctx context.Context, opts planOptions, format string, s *v1alpha1.Stack) error {
	ep, err := c.controllerEndpoint(opts.controller.forStack(s))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, planFetchTimeout)
	defer cancel()
	d, err := ep.fetchPlan(ctx, s.Namespace, s.Name, opts.id)
	if err != nil {
		return err
	}
	return c.writePlan(format, s, d, 0)
}

// planHint is the plan's last line: what a person can do with it.
func planHint(s *v1alpha1.Stack, id string) string {
	switch {
	case strings.HasPrefix(id, "review-"):
		return "This plan is a preview for review (a pull request's, or stackpilot preview's): an up of the same program with the same inputs (after the merge) applies exactly it."
	case s.GetApprovalMode() == v1alpha1.ApprovalPreviewOnly:
		return "This Stack is PreviewOnly (spec.approval.mode): its plans are shown, never applied."
	case s.GetApprovalMode() == v1alpha1.ApprovalAuto:
		return "This Stack's approval mode is Auto: the controller applies changes without approval."
	case s.Annotations[v1alpha1.ApproveAnnotation] == id:
		return fmt.Sprintf("Plan %s is approved (%s); the controller applies it.", id, v1alpha1.ApproveAnnotation)
	}
	return fmt.Sprintf("To apply exactly this plan: stackpilot approve %s -n %s --plan %s", s.Name, s.Namespace, id)
}

// noPendingPlan is exit 3 with why there is nothing to show or approve.
func noPendingPlan(s *v1alpha1.Stack) error {
	what := fmt.Sprintf("Stack %s/%s has no pending plan", s.Namespace, s.Name)
	var why string
	op := s.Status.CurrentOperation
	switch {
	case s.GetApprovalMode() == v1alpha1.ApprovalAuto:
		why = "its approval mode is Auto, so changes are applied without one (set spec.approval.mode: Manual to approve plans first)"
	case op != nil && op.Type == v1alpha1.OperationPreview:
		why = fmt.Sprintf("the controller is making one (preview %s at revision %s); run this again when it ends", op.ID, orDash(op.Revision))
	case op != nil:
		why = fmt.Sprintf("the controller is running %s %s at revision %s", op.Type, op.ID, orDash(op.Revision))
	case s.Status.LastAppliedRevision != "":
		why = "it is up to date at revision " + s.Status.LastAppliedRevision
		if ready := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); ready != nil && ready.Status != metav1.ConditionTrue {
			why += fmt.Sprintf(", but Ready is %s (%s): %s", ready.Status, ready.Reason, ready.Message)
		}
	default:
		why = fmt.Sprintf("nothing is applied yet and no plan is made yet; see `kubectl describe stack %s -n %s`", s.Name, s.Namespace)
	}
	return &exitError{code: exitNoPlan, msg: what + ": " + why}
}

// changesLine is a plan's counts in Pulumi's words: "1 to create, 2 to update".
func changesLine(c v1alpha1.ChangeSummary) string {
	var parts []string
	for _, k := range []struct {
		op string
		n  int64
	}{{"create", c.Create}, {"update", c.Update}, {"delete", c.Delete}, {"replace", c.Replace}} {
		if k.n > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", k.n, k.op))
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, ", ")
}
