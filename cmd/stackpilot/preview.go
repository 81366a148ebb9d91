package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

type previewOptions struct {
	revision   string
	timeout    time.Duration
	output     string
	controller controllerOptions
}

func (c *cli) newPreviewCmd() *cobra.Command {
	opts := previewOptions{timeout: 10 * time.Minute}
	cmd := &cobra.Command{
		Use:   "preview STACK --revision REF",
		Short: "Preview a revision of the Stack's repository now, as a pull request's preview does, and print it like pulumi preview",
		Long: `Asks the controller to preview REF of the Stack's Git repository with the
Stack's current inputs, identity and executor, as it previews a pull request
(spec.previews need not be on): nothing is applied, the stack is not locked,
and nothing is created in its backend. REF is a branch, a tag, a full commit
hash, a full reference name (refs/pull/12/head) or pull/12. The request is the
annotation preview.stackpilot.dev/revision; the answer is
status.revisionPreview. Then the plan is read from the controller (as
` + "`stackpilot plan --id`" + ` does) and printed the way ` + "`pulumi preview`" + ` prints it.

The plan is kept like a pull request's: an up of the same program with the
same inputs (the revision, once it is the one the Stack follows) applies
exactly it.

Exit codes:
  0  the preview ran; its plan was printed
  1  error: the Stack cannot be read or patched, the revision does not
     resolve, the preview failed (the message is Pulumi's), or --timeout
  2  usage error`,
		Example: `  stackpilot preview web -n infra --revision feature/bigger-db
  stackpilot preview web --revision pull/12 -o json`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.revision == "" {
				return usageErrorf("--revision is required: a branch, tag, commit, refs/... or pull/N")
			}
			if opts.timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration such as 10m", opts.timeout)
			}
			format, err := planFormat(opts.output)
			if err != nil {
				return err
			}
			if _, err := opts.controller.check(); err != nil {
				return err
			}
			g, err := c.stackGetter()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return c.previewRevision(ctx, g, args[0], format, opts)
		},
	}
	cmd.Flags().StringVar(&opts.revision, "revision", "", "What to preview: a branch, a tag, a full commit hash, refs/... or pull/N.")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", opts.timeout, "How long to wait for the preview.")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "text", "Output format: text (like pulumi preview), json or yaml (the plan document).")
	opts.controller.addFlags(cmd.Flags(), "the plan")
	return cmd
}

func (c *cli) previewRevision(ctx context.Context, g *stackGetter, name, format string, opts previewOptions) error {
	s, err := g.get(ctx, name)
	if err != nil {
		return err
	}
	if s.Spec.Source.Git == nil {
		return fmt.Errorf("the Stack %s/%s has no spec.source.git: a revision is previewed on demand for Git Stacks only", s.Namespace, s.Name)
	}
	req := v1alpha1.RevisionPreviewRequest{Revision: opts.revision, RequestedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	value, err := json.Marshal(req)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.RevisionPreviewAnnotation: string(value)}}})
	if err != nil {
		return err
	}
	if err := g.cl.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return g.explain(ctx, name, err)
	}
	fmt.Fprintf(c.stderr, "Previewing %s of Stack %s/%s; waiting up to %s for the controller...\n", opts.revision, s.Namespace, s.Name, opts.timeout)
	a, s, err := waitRevisionPreview(ctx, g, name, req.RequestedAt, opts.timeout)
	if err != nil {
		return err
	}
	if a.Phase != v1alpha1.PreviewSucceeded {
		return fmt.Errorf("the preview of %s (commit %s) failed: %s", a.Revision, orDash(a.Commit), a.Message)
	}
	if a.Plan == "" {
		fmt.Fprintf(c.stdout, "%s: %s (the controller kept no plan to print; see `stackpilot logs %s -n %s --operation %s`)\n", a.Revision, a.Message, s.Name, s.Namespace, a.Operation)
		return nil
	}
	return c.printPlanByID(ctx, planOptions{id: a.Plan, controller: opts.controller}, format, s)
}

// waitRevisionPreview reads the Stack until status.revisionPreview answers
// the request made at requestedAt with an end.
func waitRevisionPreview(ctx context.Context, g *stackGetter, name, requestedAt string, timeout time.Duration) (*v1alpha1.RevisionPreview, *v1alpha1.Stack, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(driftPollInterval)
	defer tick.Stop()
	for {
		s, err := g.get(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		if a := s.Status.RevisionPreview; a != nil && a.RequestedAt == requestedAt && a.Phase != v1alpha1.PreviewRunning {
			return a, s, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("interrupted before the preview ended")
		case <-deadline.C:
			state := "the controller has not taken the request yet (is it running, and does it serve this Stack's shard?)"
			if a := s.Status.RevisionPreview; a != nil && a.RequestedAt == requestedAt {
				state = fmt.Sprintf("the preview (operation %s) still runs", a.Operation)
			}
			return nil, nil, fmt.Errorf("timed out after %s: %s", timeout, state)
		case <-tick.C:
		}
	}
}
