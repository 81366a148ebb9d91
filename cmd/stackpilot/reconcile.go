package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// steerFieldManager is the field manager of every write of reconcile,
// suspend and resume.
const steerFieldManager = "stackpilot"

// reconcilePollInterval is how often reconcile --wait reads the Stack; the
// controller patches the live counts every few seconds.
var reconcilePollInterval = time.Second

type reconcileOptions struct {
	wait       bool
	timeout    time.Duration
	withSource bool
}

func (c *cli) newReconcileCmd() *cobra.Command {
	opts := reconcileOptions{wait: true, timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "reconcile STACK",
		Short: "Ask the controller to reconcile the Stack now and follow the operation",
		Long: `Asks the controller to reconcile the Stack now: sets the reconcile-now
annotation (stackpilot.dev/requestedAt and reconcile.fluxcd.io/requestedAt) to
the current time. With --wait (the default) it follows the operation that
runs with a live progress line (the resource counts so far), until the
Stack's status.lastHandledReconcileAt says the request was handled, and
prints the outcome.

--with-source first asks the Flux source of spec.source.sourceRef
(GitRepository, OCIRepository or Bucket) to reconcile and waits for its new
artifact. Git and OCI sources of the Stack itself are resolved again at every
reconcile: for them it adds nothing.

Exit codes:
  0  handled and Ready (with --wait=false: the request is written)
  1  error: the Stack ends not Ready (its Ready message is printed), it is
     suspended, it cannot be read or patched, or --timeout
  2  usage error`,
		Example: `  stackpilot reconcile web -n infra
  stackpilot reconcile web --with-source --timeout 10m
  stackpilot reconcile web --wait=false`,
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
			return c.reconcile(ctx, g, args[0], opts)
		},
	}
	cmd.Flags().BoolVar(&opts.wait, "wait", opts.wait, "Follow the operation until the request is handled (--wait=false: only request it).")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", opts.timeout, "How long to wait (for the source and the Stack together).")
	cmd.Flags().BoolVar(&opts.withSource, "with-source", false, "Reconcile the Stack's Flux source first and wait for its new artifact.")
	return cmd
}

func (c *cli) reconcile(ctx context.Context, g *stackGetter, name string, opts reconcileOptions) error {
	s, err := g.get(ctx, name)
	if err != nil {
		return err
	}
	if s.Spec.Suspend {
		return fmt.Errorf("the Stack %s/%s is suspended (spec.suspend: true): resume it with `stackpilot resume %s -n %s`", s.Namespace, s.Name, s.Name, s.Namespace)
	}
	deadline := time.Now().Add(opts.timeout)
	if opts.withSource {
		if err := c.reconcileSource(ctx, g, s, opts.wait, deadline); err != nil {
			return err
		}
	}
	value := time.Now().UTC().Format(time.RFC3339Nano)
	if err := requestReconcile(ctx, g.cl, s, value); err != nil {
		return g.explain(ctx, name, err)
	}
	if !opts.wait {
		fmt.Fprintf(c.stderr, "Requested a reconcile of Stack %s/%s (%s); follow it with `stackpilot reconcile %s -n %s` or `kubectl get stack %s -n %s -w`\n",
			s.Namespace, s.Name, value, s.Name, s.Namespace, s.Name, s.Namespace)
		return nil
	}
	fmt.Fprintf(c.stderr, "Requested a reconcile of Stack %s/%s; waiting up to %s...\n", s.Namespace, s.Name, time.Until(deadline).Round(time.Second))
	return c.followReconcile(ctx, g, name, value, deadline, opts.timeout)
}

// requestReconcile sets both reconcile-now annotations to value with a merge
// patch (that one key each, so it races with no other writer). Both: the
// controller reads Stackpilot's first, so an older value there (a drift
// check's) would hide a new Flux one; Flux's is what Flux tooling watches.
func requestReconcile(ctx context.Context, cl client.Client, obj client.Object, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.ReconcileRequestAnnotation: value,
		meta.ReconcileRequestAnnotation:     value,
	}}})
	if err != nil {
		return err
	}
	return cl.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(steerFieldManager))
}

// followReconcile polls the Stack, showing the running operation, until
// the request value is handled, then reports how the Stack ended.
func (c *cli) followReconcile(ctx context.Context, g *stackGetter, name, value string, deadline time.Time, timeout time.Duration) error {
	line := newLiveProgress(c.stderr)
	defer line.end()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	tick := time.NewTicker(reconcilePollInterval)
	defer tick.Stop()
	for {
		s, err := g.get(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted before the controller handled the reconcile request %s", value)
			}
			return err
		}
		if s.Status.LastHandledReconcileAt == value && s.Status.CurrentOperation == nil {
			line.end()
			return c.reportReconciled(s, value)
		}
		line.update(s.Status.CurrentOperation, time.Now())
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted before the controller handled the reconcile request %s", value)
		case <-timer.C:
			line.end()
			return waitTimeout(s, value, timeout)
		case <-tick.C:
		}
	}
}

// reportReconciled prints the outcome: the operations the request ran and
// the Ready condition; exit 1 with Ready's message when the Stack is not
// Ready.
func (c *cli) reportReconciled(s *v1alpha1.Stack, value string) error {
	since, _ := time.Parse(time.RFC3339Nano, value)
	for i := len(s.Status.History) - 1; i >= 0; i-- {
		h := s.Status.History[i]
		if h.StartedAt.Time.Before(since.Truncate(time.Second)) || h.FinishedAt == nil {
			continue
		}
		fmt.Fprintf(c.stderr, "%s %s %s: %s\n", h.Type, h.ID, h.Outcome, orDash(h.Message))
	}
	ready := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		msg := fmt.Sprintf("Stack %s/%s is not Ready", s.Namespace, s.Name)
		if ready != nil {
			msg += fmt.Sprintf(" (%s): %s", ready.Reason, ready.Message)
		}
		return &exitError{code: 1, msg: msg}
	}
	fmt.Fprintf(c.stdout, "Stack %s/%s reconciled: %s (revision %s)\n", s.Namespace, s.Name, ready.Message, orDash(s.Status.LastAppliedRevision))
	return nil
}
