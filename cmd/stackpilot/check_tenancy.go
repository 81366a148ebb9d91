package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/manifests"
)

// Who holds the controller's rights. With the Job executor as the default
// (what stackpilot install sets) each operation is a Pod acting as the
// Stack's ServiceAccount: a Stack writer holds only what that account holds,
// so Stack writes may be aggregated into edit and admin; check names the
// Stacks outside the controller's namespace that still run with Local. With
// Local as the default every program runs as a process of the controller and
// can read its mounted token: whoever may create, update or patch a Stack can
// act as the controller. check says so, names the Stacks of other namespaces
// it serves, and fails when a built-in namespace role grants Stack writes,
// since that hands the controller's rights to every namespace editor.

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

func checkStackWriters(ctx context.Context, r *checkReport, cl client.Client, ns string, found foundController) {
	executor := found.flags["default-executor"]
	if executor == "" {
		executor = v1alpha1.ExecutorLocal
	}
	if found.flags == nil {
		// No Deployment: a controller run as a process, whose flags check
		// cannot read; its binary's default is Local.
		executor = v1alpha1.ExecutorLocal
	}
	if executor == v1alpha1.ExecutorJob {
		r.ok("the controller runs each operation as a Job (--default-executor=Job): a Stack writer acts only as the Stack's ServiceAccount")
		checkLocalStacks(ctx, r, cl, ns, found, true)
		return
	}
	r.warn("the controller runs each program in its own process (Local executor): whoever may create, update or patch a Stack "+
		"holds the controller's rights (ClusterRole %s, bound to its ServiceAccount); bind ClusterRole %s only to whom you would give those",
		manifests.ClusterRoleName, manifests.StackEditorRoleName)
	checkLocalStacks(ctx, r, cl, ns, found, false)
	checkNamespaceRoles(ctx, r, cl)
}

// checkLocalStacks warns about the Stacks outside the controller's
// namespace ns (and inside the namespaces it watches) that run with the
// Local executor: theirs (spec.runner.executor: Local) where Job is the
// default, all but the Job ones where Local is.
func checkLocalStacks(ctx context.Context, r *checkReport, cl client.Client, ns string, found foundController, jobDefault bool) {
	var list v1alpha1.StackList
	if err := cl.List(ctx, &list); err != nil {
		r.warn("cannot list Stacks (%v), so which run with the Local executor outside namespace %s is not checked; you need list on stacks.%s",
			err, ns, v1alpha1.GroupVersion.Group)
		return
	}
	watched := map[string]bool{}
	for _, w := range strings.Split(found.flags["watch-namespace"], ",") {
		if w = strings.TrimSpace(w); w != "" {
			watched[w] = true
		}
	}
	var local []string
	for _, s := range list.Items {
		if s.Namespace == ns || (len(watched) > 0 && !watched[s.Namespace]) {
			continue
		}
		executor := ""
		if s.Spec.Runner != nil {
			executor = s.Spec.Runner.Executor
		}
		if executor == v1alpha1.ExecutorLocal || (!jobDefault && executor == "") {
			local = append(local, s.Namespace+"/"+s.Name)
		}
	}
	if len(local) == 0 {
		return
	}
	slices.Sort(local)
	names := strings.Join(local, ", ")
	if len(local) > maxListed {
		names = strings.Join(local[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(local)-maxListed)
	}
	if jobDefault {
		how := "the controller refuses them (LocalExecutorNotAllowed) unless it runs with --allow-local-executor"
		if _, allowed := found.flags["allow-local-executor"]; allowed && found.flags["allow-local-executor"] != "false" {
			how = "the controller runs them (--allow-local-executor), and their writers can act as the controller"
		}
		r.warn("%d Stack(s) outside namespace %s ask for the Local executor (spec.runner.executor: Local): %s; %s. "+
			"Remove their spec.runner.executor to run them as Jobs", len(local), ns, names, how)
		return
	}
	r.warn("the controller runs %d Stack(s) outside its namespace %s with the Local executor, inside the controller: %s; "+
		"whoever may write them can act as the controller. Run them as Jobs: reinstall with the Job executor (`stackpilot install`, "+
		"which passes --default-executor=Job), or set spec.runner.executor: Job on each, with a ServiceAccount (spec.serviceAccountName or --default-service-account)",
		len(local), ns, names)
}

// maxListed bounds the Stacks one check line names.
const maxListed = 5

// controllerFlags are the flags of the Deployment's manager container
// (--name=value or --name value; a bare --name is "true").
func controllerFlags(d *appsv1.Deployment) map[string]string {
	flags := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != manifests.ContainerName && len(d.Spec.Template.Spec.Containers) > 1 {
			continue
		}
		args := append(slices.Clone(c.Command), c.Args...)
		for i := 0; i < len(args); i++ {
			name, ok := strings.CutPrefix(args[i], "--")
			if !ok {
				continue
			}
			if k, v, ok := strings.Cut(name, "="); ok {
				flags[k] = v
				continue
			}
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && name != "leader-elect" && name != "allow-local-executor" {
				flags[name] = args[i+1]
				i++
				continue
			}
			flags[name] = "true"
		}
	}
	return flags
}

// checkNamespaceRoles fails when a built-in namespace role grants Stack
// writes: with Local as the default executor that hands the controller's
// rights to every namespace editor.
func checkNamespaceRoles(ctx context.Context, r *checkReport, cl client.Client) {
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
