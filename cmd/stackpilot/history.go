package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func (c *cli) newHistoryCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "history STACK",
		Short: "List a Stack's last operations, oldest first",
		Long: `Lists the Stack's last 10 operations (status.history) oldest first, like
` + "`helm history`" + `, and the one running now last: id, type, revision,
outcome, change counts (+created ~updated -deleted +-replaced), when it
started, how long it took, and its message (the reason of a failure first).

-o json|yaml prints the operation records whole, in the same order.`,
		Example: `  stackpilot history web -n infra
  stackpilot history web -o json | jq -r '.[] | select(.outcome == "failed") | .message'`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			return c.withStack(args[0], func(_ context.Context, _ *stackGetter, s *v1alpha1.Stack) error {
				ops := operationsOldestFirst(s)
				return printList(c.stdout, format, ops, func() error {
					if len(ops) == 0 {
						c.infof("Stack %s/%s has run no operation yet.", s.Namespace, s.Name)
						return nil
					}
					return writeOperations(c.stdout, ops, time.Now())
				})
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// operationsOldestFirst is status.history reversed, then the running
// operation unless the history holds it already.
func operationsOldestFirst(s *v1alpha1.Stack) []v1alpha1.OperationRecord {
	h := s.Status.History
	ops := make([]v1alpha1.OperationRecord, 0, len(h)+1)
	for i := len(h) - 1; i >= 0; i-- {
		ops = append(ops, h[i])
	}
	if op := s.Status.CurrentOperation; op != nil && (len(h) == 0 || h[0].ID != op.ID) {
		ops = append(ops, *op)
	}
	return ops
}
