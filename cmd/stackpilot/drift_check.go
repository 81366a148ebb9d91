package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// driftPollInterval is how often `drift check --wait` reads the Stack: a
// check takes seconds (a refresh preview), a watch would save little.
var driftPollInterval = time.Second

type driftCheckOptions struct {
	wait    bool
	timeout time.Duration
	output  string
}

func (c *cli) newDriftCheckCmd() *cobra.Command {
	opts := driftCheckOptions{wait: true, timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   "check STACK",
		Short: "Run a drift check of the Stack now; exit 3 when it drifted",
		Long: `Asks the controller for a drift check now: sets the annotation
stackpilot.dev/requestedAt to "drift-<now>" (the controller runs a refresh
preview of the last applied revision and inputs, even in mode Disabled, and
changes nothing), then waits until the Stack's status.lastHandledReconcileAt
says the request was handled and prints the result as ` + "`drift show`" + ` does.

Exit codes, like terraform plan -detailed-exitcode but with 3 for "drifted"
(2 is this CLI's usage error):
  0  the check ran and found no drift (or, in mode Remediate, repaired it)
  1  error: the Stack cannot be read or patched, the check failed, or --timeout
  2  usage error
  3  the check ran and found drift (condition Drifted=True)
With --wait=false it exits 0 once the request is written.`,
		Example: `  stackpilot drift check web -n infra
  stackpilot drift check web --timeout 10m -o json
  stackpilot drift check web --wait=false`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(opts.output)
			if err != nil {
				return err
			}
			if opts.wait && opts.timeout <= 0 {
				return usageErrorf("--timeout %s: want a positive duration such as 5m", opts.timeout)
			}
			g, err := c.stackGetter()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return c.driftCheck(ctx, g, args[0], format, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.wait, "wait", opts.wait, "Wait for the check's result (--wait=false: only request it).")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", opts.timeout, "How long to wait for the controller to handle the request.")
	addOutputFlag(cmd, &opts.output)
	return cmd
}

func (c *cli) driftCheck(ctx context.Context, g *stackGetter, name, format string, opts driftCheckOptions) error {
	s, err := g.get(ctx, name)
	if err != nil {
		return err
	}
	if s.Spec.Suspend {
		return fmt.Errorf("the Stack %s/%s is suspended (spec.suspend: true): the controller runs no check until it is resumed", s.Namespace, s.Name)
	}
	before := checkedAt(s)
	value := driftRequestValue(time.Now())
	if err := requestDriftCheck(ctx, g.cl, s, value); err != nil {
		return g.explain(ctx, name, err)
	}
	if !opts.wait {
		fmt.Fprintf(c.stderr, "Requested a drift check of Stack %s/%s (%s); see its result with `stackpilot drift show %s -n %s`\n",
			s.Namespace, s.Name, value, s.Name, s.Namespace)
		return nil
	}
	fmt.Fprintf(c.stderr, "Requested a drift check of Stack %s/%s; waiting up to %s for the controller...\n", s.Namespace, s.Name, opts.timeout)
	s, err = waitHandled(ctx, g, name, value, opts.timeout)
	if err != nil {
		return err
	}
	r := newDriftReport(s)
	if err := checkRan(s, r, before); err != nil {
		return err
	}
	if err := writeDriftReport(c.stdout, format, r, time.Now()); err != nil {
		return err
	}
	if r.drifted() {
		msg := fmt.Sprintf("Stack %s/%s drifted: %d resource(s)", s.Namespace, s.Name, r.Total)
		if ready := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); ready != nil && ready.Status == metav1.ConditionFalse {
			// In mode Remediate: the remediate failed.
			msg += fmt.Sprintf("; Ready is False (%s): %s", ready.Reason, ready.Message)
		}
		return &exitError{code: exitDrifted, msg: msg}
	}
	return nil
}

// driftRequestValue is the reconcile-request value that asks for a drift
// check: unique per call, so that each call is handled once.
func driftRequestValue(now time.Time) string {
	return v1alpha1.DriftCheckRequestPrefix + now.UTC().Format(time.RFC3339Nano)
}

// requestDriftCheck writes the annotation with a merge patch: it touches
// that one key, so it races with no other writer of the Stack.
func requestDriftCheck(ctx context.Context, cl client.Client, s *v1alpha1.Stack, value string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{v1alpha1.ReconcileRequestAnnotation: value}},
	})
	if err != nil {
		return err
	}
	return cl.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch))
}

// errTimeout marks a wait that ran out of time, for tests.
var errTimeout = errors.New("timed out")

// waitHandled reads the Stack until status.lastHandledReconcileAt is value.
// The reads use ctx, not the deadline: a read cut short by it would end
// with the client's error instead of saying what to look at.
func waitHandled(ctx context.Context, g *stackGetter, name, value string, timeout time.Duration) (*v1alpha1.Stack, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(driftPollInterval)
	defer tick.Stop()
	for {
		s, err := g.get(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("interrupted before the controller handled %s", value)
			}
			return nil, err
		}
		if s.Status.LastHandledReconcileAt == value {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted before the controller handled %s", value)
		case <-deadline.C:
			return nil, waitTimeout(s, value, timeout)
		case <-tick.C:
		}
	}
}

// waitTimeout says why nothing came back, from what the Stack last showed.
func waitTimeout(s *v1alpha1.Stack, value string, timeout time.Duration) error {
	why := fmt.Sprintf("is stackpilot-controller running and watching namespace %s? (status.lastHandledReconcileAt is %q)",
		s.Namespace, s.Status.LastHandledReconcileAt)
	if op := s.Status.CurrentOperation; op != nil {
		why = fmt.Sprintf("the controller is running %s %s, which goes first; wait longer with --timeout", op.Type, op.ID)
	}
	return fmt.Errorf("%w after %s waiting for the controller to handle %s: %s", errTimeout, timeout, value, why)
}

// checkRan fails when the request was handled without a check that
// finished: the check failed, or none could run (nothing applied yet).
func checkRan(s *v1alpha1.Stack, r driftReport, before *metav1.Time) error {
	if c := r.Condition; c != nil && c.Status == metav1.ConditionUnknown {
		return fmt.Errorf("the drift check of Stack %s/%s failed (%s): %s", s.Namespace, s.Name, c.Reason, c.Message)
	}
	after := checkedAt(s)
	if after != nil && (before == nil || !after.Equal(before)) {
		return nil
	}
	if !r.Applied {
		return fmt.Errorf("no drift check ran: Stack %s/%s has applied nothing yet (a check compares with the last apply); see `kubectl describe stack %s -n %s`",
			s.Namespace, s.Name, s.Name, s.Namespace)
	}
	why := "see `kubectl describe stack " + s.Name + " -n " + s.Namespace + "`"
	if h := s.Status.History; len(h) > 0 && h[0].Type != v1alpha1.OperationDriftCheck && h[0].Type != v1alpha1.OperationRemediate {
		// A new revision or new inputs go before a check.
		why = fmt.Sprintf("the controller ran %s %s first (a change to apply goes before a check); run the check again", h[0].Type, h[0].ID)
	} else if ready := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); ready != nil && ready.Status != metav1.ConditionTrue {
		why = fmt.Sprintf("Ready is %s (%s): %s", ready.Status, ready.Reason, ready.Message)
	}
	return fmt.Errorf("the controller handled the request but no drift check finished (status.drift.checkedAt did not change); %s", why)
}

func checkedAt(s *v1alpha1.Stack) *metav1.Time {
	if s.Status.Drift == nil {
		return nil
	}
	return s.Status.Drift.CheckedAt
}
