package main

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/wire"
)

// logsOptions are the flags of `stackpilot logs`.
type logsOptions struct {
	operation  string
	follow     bool
	controller controllerOptions
}

func (c *cli) newLogsCmd() *cobra.Command {
	o := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs STACK",
		Short: "Print Pulumi's output of the Stack's last operation (or of one named)",
		Long: `Prints what Pulumi printed during one of the Stack's recent operations (what
` + "`pulumi up`" + ` shows: the resources, their changes, the outputs, the errors), as the
controller keeps it: the last 10 operations of each Stack, each at most 1 MiB
(its beginning and end), every secret value replaced by [secret], no colour.

Without --operation, the last operation that has a log (the running one, if
any); the IDs are in ` + "`kubectl get stack STACK -o jsonpath='{.status.history[*].id}'`" + `.
--follow streams a running operation's output until it ends.

The controller serves the logs over HTTPS; the CLI reaches it through the API
server's service proxy (service stackpilot-controller, port logs, in
stackpilot-system) and presents the kubeconfig user's bearer token, which the
controller checks: reading a Stack's logs needs get on that Stack (and get on
services/proxy for the proxy). A kubeconfig user with a client certificate has
no token: pass one with --token.`,
		Example: `  stackpilot logs web -n infra
  stackpilot logs web --operation up-20260101-120000-1a2b3c4d
  stackpilot logs web --follow`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			return c.logs(ctx, args[0], o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.operation, "operation", "", "The operation whose output to print (an ID of status.history; default: the last one).")
	fs.BoolVarP(&o.follow, "follow", "f", false, "Stream a running operation's output until it ends.")
	o.controller.addFlags(fs, "the logs")
	return cmd
}

func (c *cli) logs(ctx context.Context, name string, o *logsOptions) error {
	if err := o.controller.checkService(); err != nil {
		return err
	}
	g, err := c.stackGetter()
	if err != nil {
		return err
	}
	// First the Stack itself: a wrong name or namespace gets the one message
	// every verb gives ("did you mean -n platform?"). Not being allowed to
	// read it is for the controller to say, the way it says it for its logs.
	key := client.ObjectKey{Namespace: g.ns, Name: name}
	stack := &v1alpha1.Stack{}
	if err := g.cl.Get(ctx, key, stack); err != nil {
		if !apierrors.IsForbidden(err) {
			return g.explain(ctx, name, err)
		}
		stack = nil // its shard unknown: the main controller's Service
	}
	ep, err := c.controllerEndpoint(o.controller.forStack(stack))
	if err != nil {
		return err
	}
	if ep.tokenErr != nil {
		return ep.tokenErr
	}
	resp, err := ep.get(ctx, wire.LogsURL(ep.base, key.Namespace, key.Name, o.operation, o.follow), "")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ep.refusal(resp.StatusCode, body, "the logs", key.Namespace, key.Name, func(msg string) error {
			return &exitError{code: 1, msg: msg}
		})
	}
	if _, err := io.Copy(c.stdout, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the log from %s: %w", ep.via, err)
	}
	return nil
}
