package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/manifests"
)

// Who holds the controller's rights. With the Local executor, the only one for
// now, every program runs as a process of the controller and can read its
// mounted token: whoever may create, update or patch a Stack can act as the
// controller. check says so, and fails when a built-in namespace role grants
// Stack writes (an older install aggregated them into edit and admin), since
// that hands the controller's rights to every namespace editor.

// stackWriteVerbs are the verbs that let a user choose what a Stack runs.
var stackWriteVerbs = []string{"create", "update", "patch"}

// namespaceRoles are the built-in roles bound per namespace, with what their
// holders are called.
var namespaceRoles = []struct{ name, holders string }{
	{"admin", "admin"},
	{"edit", "editor"},
	{"view", "viewer"},
}

// grantingRole is a ClusterRole that folds Stack writes into built-in roles:
// the labels that do it, the built-in roles it reaches, their holders.
type grantingRole struct {
	name             string
	labels, builtins []string
	holders          []string
	verbs            []string
}

func checkStackWriters(ctx context.Context, r *checkReport, cl client.Client) {
	r.warn("the controller runs each program in its own process (Local executor): whoever may create, update or patch a Stack "+
		"holds the controller's rights (ClusterRole %s, bound to its ServiceAccount); bind ClusterRole %s only to whom you would give those",
		manifests.ClusterRoleName, manifests.StackEditorRoleName)
	clean := true
	var checked []string
	sources := map[string]*grantingRole{}
	for _, role := range namespaceRoles {
		var cr rbacv1.ClusterRole
		err := cl.Get(ctx, client.ObjectKey{Name: role.name}, &cr)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			r.warn("cannot read ClusterRole %s (%v), so whether its holders may write Stacks is not checked; you need get on clusterroles.rbac.authorization.k8s.io", role.name, err)
			clean = false
			continue
		}
		checked = append(checked, role.name)
		verbs := stackVerbs(cr.Rules)
		if len(verbs) == 0 {
			continue
		}
		clean = false
		found := map[string][]string{}
		aggregatedInto(ctx, cl, &cr, map[string]bool{role.name: true}, found)
		if len(found) == 0 {
			// Rules of its own, or sources check may not list.
			r.fail(fmt.Sprintf("ClusterRole %s lets every namespace %s %s Stacks, and so act as the controller", role.name, role.holders, strings.Join(verbs, ", ")),
				fmt.Sprintf("remove what grants writes on stacks.%s from ClusterRole %s (or from the ClusterRoles aggregated into it), and bind ClusterRole %s only to the Stack writers you trust",
					v1alpha1.GroupVersion.Group, role.name, manifests.StackEditorRoleName))
			continue
		}
		for name, labels := range found {
			g := sources[name]
			if g == nil {
				g = &grantingRole{name: name}
				sources[name] = g
			}
			g.builtins = append(g.builtins, role.name)
			g.holders = append(g.holders, role.holders)
			g.labels = union(g.labels, labels)
			g.verbs = union(g.verbs, verbs)
		}
	}
	// One failure per ClusterRole that brings the writes in: the fix is
	// there, however many built-in roles it reaches.
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		g := sources[name]
		verbs := ordered(g.verbs, stackWriteVerbs)
		fix := fmt.Sprintf("remove its label %s (`kubectl label clusterrole %s %s-`)", g.labels[0], name, g.labels[0])
		if len(g.labels) > 1 {
			fix = fmt.Sprintf("remove its labels %s (`kubectl label clusterrole %s %s`)", strings.Join(g.labels, " and "), name, strings.Join(g.labels, "- ")+"-")
		}
		r.fail(fmt.Sprintf("ClusterRole %s lets every namespace %s %s Stacks, and so act as the controller (it is aggregated into %s)",
			name, strings.Join(g.holders, " and "), strings.Join(verbs, ", "), strings.Join(g.builtins, ", ")),
			fix+fmt.Sprintf(", and bind ClusterRole %s only to the Stack writers you trust", manifests.StackEditorRoleName))
	}
	if clean && len(checked) > 0 {
		r.ok("no built-in namespace role (%s) lets its holders write Stacks", strings.Join(checked, ", "))
	}
}

// aggregatedInto follows cr's aggregation selectors to the ClusterRoles
// that grant Stack writes, through aggregated ones (edit is aggregated into
// admin), and records each with the selector labels that fold it in. What
// cannot be listed is left out.
func aggregatedInto(ctx context.Context, cl client.Client, cr *rbacv1.ClusterRole, seen map[string]bool, found map[string][]string) {
	if cr.AggregationRule == nil {
		return
	}
	for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			continue
		}
		var list rbacv1.ClusterRoleList
		if err := cl.List(ctx, &list, client.MatchingLabelsSelector{Selector: selector}); err != nil {
			continue
		}
		for i := range list.Items {
			m := &list.Items[i]
			if len(stackVerbs(m.Rules)) == 0 {
				continue
			}
			if m.AggregationRule != nil {
				if !seen[m.Name] {
					seen[m.Name] = true
					aggregatedInto(ctx, cl, m, seen, found)
				}
				continue
			}
			var labels []string
			for k := range sel.MatchLabels {
				labels = append(labels, k)
			}
			for _, e := range sel.MatchExpressions {
				labels = append(labels, e.Key)
			}
			found[m.Name] = union(found[m.Name], labels)
		}
	}
}

// stackVerbs are the write verbs that rules grant on Stacks, in
// stackWriteVerbs' order.
func stackVerbs(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, verb := range stackWriteVerbs {
		for _, rule := range rules {
			if matches(rule.APIGroups, v1alpha1.GroupVersion.Group) && matches(rule.Resources, "stacks") && matches(rule.Verbs, verb) {
				out = append(out, verb)
				break
			}
		}
	}
	return out
}

func matches(list []string, want string) bool {
	return slices.Contains(list, want) || slices.Contains(list, rbacv1.ResourceAll)
}

// union is a and b, sorted, without repeats.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// ordered is set in the order of all.
func ordered(set, all []string) []string {
	var out []string
	for _, v := range all {
		if slices.Contains(set, v) {
			out = append(out, v)
		}
	}
	return out
}
