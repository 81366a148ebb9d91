package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
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

// stackGetter reads one Stack and explains the failures a user can fix.
type stackGetter struct {
	cl client.Client
	ns string
}

func (c *cli) stackGetter() (*stackGetter, error) {
	ns, err := c.kube.Namespace()
	if err != nil {
		return nil, err
	}
	cl, err := c.kube.Client()
	if err != nil {
		return nil, err
	}
	return &stackGetter{cl: cl, ns: ns}, nil
}

func (g *stackGetter) get(ctx context.Context, name string) (*v1alpha1.Stack, error) {
	var s v1alpha1.Stack
	err := g.cl.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: name}, &s)
	if err == nil {
		return &s, nil
	}
	return nil, g.explain(ctx, name, err)
}

// explain turns a failed read of Stack name into a message that says what
// to do: the namespace it is in, a close name, the missing CRD or RBAC.
func (g *stackGetter) explain(ctx context.Context, name string, err error) error {
	switch {
	case apimeta.IsNoMatchError(err):
		return fmt.Errorf("this cluster has no Stack kind (stacks.stackpilot.dev): install Stackpilot's CRDs, or pick the cluster with --context")
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to read Stack %s in namespace %s: ask for get and patch on stacks.stackpilot.dev there (%v)", name, g.ns, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("no Stack %s in namespace %s%s", name, g.ns, g.suggest(ctx, name))
	}
	return fmt.Errorf("reading Stack %s in namespace %s: %w", name, g.ns, err)
}

// suggest looks for the Stack elsewhere: the same name in other namespaces
// (the usual mistake is a missing -n), else close names in this one. It
// needs list rights; without them it only points at kubectl.
func (g *stackGetter) suggest(ctx context.Context, name string) string {
	var all v1alpha1.StackList
	if err := g.cl.List(ctx, &all); err != nil {
		var here v1alpha1.StackList
		if err := g.cl.List(ctx, &here, client.InNamespace(g.ns)); err != nil {
			return fmt.Sprintf("; list them with `kubectl get stacks -n %s`", g.ns)
		}
		all = here
	}
	var nss, close []string
	for _, s := range all.Items {
		switch {
		case s.Name == name && s.Namespace != g.ns:
			nss = append(nss, "-n "+s.Namespace)
		case s.Namespace == g.ns && editDistance(s.Name, name) <= 2:
			close = append(close, s.Name)
		}
	}
	sort.Strings(nss)
	sort.Strings(close)
	switch {
	case len(nss) > 0:
		return "; did you mean " + strings.Join(nss, " or ") + "?"
	case len(close) > 0:
		return "; did you mean " + strings.Join(close, " or ") + "?"
	}
	return fmt.Sprintf("; list them with `kubectl get stacks -n %s`", g.ns)
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
	var list v1alpha1.StackList
	if err := g.cl.List(ctx, &list, client.InNamespace(g.ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, toComplete) {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}
