package main

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Exit codes of `drift check`, besides 0 (checked, no drift), 1 (error,
// timeout, or the check failed) and 2 (usage), which every verb shares.
// terraform plan -detailed-exitcode says "changes" with 2, but 2 is this
// CLI's usage error, so drift is 3: a script can tell "drifted" from
// "could not tell".
const exitDrifted = 3

func (c *cli) newDriftCmd() *cobra.Command {
	cmd := groupCmd("drift", "Check a Stack for drift and show what drifted",
		`A drift is a change made to a Stack's resources outside its program (kubectl
edit, a console, an autoscaler). The controller checks on a schedule
(spec.driftDetection) with a refresh preview of the last applied revision;
these commands ask for a check now and show what the last one found.`)
	cmd.AddCommand(c.newDriftShowCmd(), c.newDriftCheckCmd())
	return cmd
}

// editDistance is Levenshtein's, for "did you mean" on Stack names.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// completeStacks completes a Stack name from the Stacks in the namespace of
// -n (or the context's), for `drift show|check <TAB>`.
func (c *cli) completeStacks(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	g, err := c.stackGetter()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stacks, err := g.list(ctx, false, nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, s := range stacks {
		if strings.HasPrefix(s.Name, toComplete) {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}
