package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxcd/pkg/apis/meta"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func (c *cli) newSuspendCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "suspend STACK",
		Short: "Stop reconciling the Stack (spec.suspend: true)",
		Long: `Sets spec.suspend to true (a merge patch, field manager "stackpilot"): the
controller checks no source and starts no operation for the Stack until it is
resumed. An operation already running finishes. Resume with
` + "`stackpilot resume STACK`" + `.`,
		Example:           `  stackpilot suspend web -n infra`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := c.stackGetter()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			s, err := g.get(ctx, args[0])
			if err != nil {
				return err
			}
			if s.Spec.Suspend {
				fmt.Fprintf(c.stdout, "Stack %s/%s is already suspended\n", s.Namespace, s.Name)
				return nil
			}
			if err := setSuspend(ctx, g.cl, s, true, ""); err != nil {
				return g.explain(ctx, s.Name, err)
			}
			fmt.Fprintf(c.stdout, "Suspended Stack %s/%s\n", s.Namespace, s.Name)
			return nil
		},
	}
}

func (c *cli) newResumeCmd() *cobra.Command {
	opts := reconcileOptions{wait: true, timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "resume STACK",
		Short: "Resume reconciling the Stack and follow the reconcile it starts",
		Long: `Sets spec.suspend to false and requests a reconcile now (one merge patch,
field manager "stackpilot"), then, with --wait (the default), follows it like
` + "`stackpilot reconcile`" + ` does: exit 1 with the Ready message when the Stack ends
not Ready.`,
		Example: `  stackpilot resume web -n infra
  stackpilot resume web --wait=false`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.wait && opts.timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration such as 5m", opts.timeout)
			}
			g, err := c.stackGetter()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return c.resume(ctx, g, args[0], opts)
		},
	}
	cmd.Flags().BoolVar(&opts.wait, "wait", opts.wait, "Follow the reconcile until it is handled (--wait=false: only resume).")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", opts.timeout, "How long to wait.")
	return cmd
}

func (c *cli) resume(ctx context.Context, g *stackGetter, name string, opts reconcileOptions) error {
	s, err := g.get(ctx, name)
	if err != nil {
		return err
	}
	value := time.Now().UTC().Format(time.RFC3339Nano)
	if err := setSuspend(ctx, g.cl, s, false, value); err != nil {
		return g.explain(ctx, name, err)
	}
	fmt.Fprintf(c.stderr, "Resumed Stack %s/%s\n", s.Namespace, s.Name)
	if !opts.wait {
		return nil
	}
	return c.followReconcile(ctx, g, name, value, time.Now().Add(opts.timeout), opts.timeout)
}

// setSuspend writes spec.suspend and, when request is set, the reconcile-now
// annotations in one merge patch: the resumed Stack is reconciled at once,
// not at its next interval.
func setSuspend(ctx context.Context, cl client.Client, s *v1alpha1.Stack, suspend bool, request string) error {
	body := map[string]any{"spec": map[string]any{"suspend": suspend}}
	if request != "" {
		body["metadata"] = map[string]any{"annotations": map[string]string{
			v1alpha1.ReconcileRequestAnnotation: request,
			meta.ReconcileRequestAnnotation:     request,
		}}
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return cl.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(steerFieldManager))
}
