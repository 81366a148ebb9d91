package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

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

// withStack is the one read path of the verbs that act on a named Stack:
// the getter of -n's namespace, a context that Ctrl-C cancels, the Stack
// read (or the error that says what to do), then fn.
func (c *cli) withStack(name string, fn func(ctx context.Context, g *stackGetter, s *v1alpha1.Stack) error) error {
	if c.kube.allNamespaces {
		return usageErrorf("-A/--all-namespaces lists Stacks; a named Stack is read in one namespace: use -n NAMESPACE")
	}
	g, err := c.stackGetter()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	s, err := g.get(ctx, name)
	if err != nil {
		return err
	}
	return fn(ctx, g, s)
}

// list reads the Stacks of g's namespace, or of every namespace, that
// match selector (nil: all), sorted by namespace and name.
func (g *stackGetter) list(ctx context.Context, all bool, selector labels.Selector) ([]v1alpha1.Stack, error) {
	var opts []client.ListOption
	where := "namespace " + g.ns
	if !all {
		opts = append(opts, client.InNamespace(g.ns))
	} else {
		where = "all namespaces"
	}
	if selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: selector})
	}
	var list v1alpha1.StackList
	if err := g.cl.List(ctx, &list, opts...); err != nil {
		switch {
		case apimeta.IsNoMatchError(err):
			return nil, fmt.Errorf("this cluster has no Stack kind (stacks.stackpilot.dev): install Stackpilot's CRDs, or pick the cluster with --context")
		case apierrors.IsForbidden(err) && all:
			return nil, fmt.Errorf("not allowed to list Stacks in all namespaces: drop -A and name one with -n, or ask for list on stacks.stackpilot.dev cluster-wide (%v)", err)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("not allowed to list Stacks in namespace %s: ask for list on stacks.stackpilot.dev there (%v)", g.ns, err)
		}
		return nil, fmt.Errorf("listing Stacks in %s: %w", where, err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	return items, nil
}

// notFoundHint is what to say when a list finds no Stack.
func (g *stackGetter) notFoundHint(all bool, selector labels.Selector) string {
	where := "in namespace " + g.ns
	if all {
		where = "in any namespace"
	}
	if selector != nil && !selector.Empty() {
		where += fmt.Sprintf(" matching %q", selector.String())
	}
	return "No Stacks found " + where + "."
}
