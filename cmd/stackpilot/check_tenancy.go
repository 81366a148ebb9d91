package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	{"admin", "namespace admin"},
	{"edit", "namespace editor"},
	{"view", "namespace viewer"},
}

func checkStackWriters(ctx context.Context, r *checkReport, cl client.Client) {
	r.warn("the controller runs each program in its own process (Local executor): whoever may create, update or patch a Stack "+
		"holds the controller's rights (ClusterRole %s, bound to its ServiceAccount); bind ClusterRole %s only to whom you would give those",
		manifests.ClusterRoleName, manifests.StackEditorRoleName)
	clean := true
	var checked []string
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
		through := throughRoles(ctx, cl, role.name)
		problem := fmt.Sprintf("ClusterRole %s lets every %s %s Stacks, and so act as the controller", role.name, role.holders, strings.Join(verbs, ", "))
		if len(through) > 0 {
			problem += " (through ClusterRole " + strings.Join(through, ", ") + ")"
		}
		r.fail(problem, aggregationFix(role.name, cr, through))
	}
	if clean && len(checked) > 0 {
		r.ok("no built-in namespace role (%s) lets its holders write Stacks", strings.Join(checked, ", "))
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

// aggregationLabel folds a ClusterRole into the built-in role.
func aggregationLabel(role string) string { return "rbac.authorization.k8s.io/aggregate-to-" + role }

// throughRoles names the ClusterRoles, labelled to be folded into role, that
// grant Stack writes (none when they cannot be listed).
func throughRoles(ctx context.Context, cl client.Client, role string) []string {
	var list rbacv1.ClusterRoleList
	if err := cl.List(ctx, &list, client.MatchingLabels{aggregationLabel(role): "true"}); err != nil {
		return nil
	}
	var names []string
	for _, cr := range list.Items {
		if len(stackVerbs(cr.Rules)) > 0 {
			names = append(names, cr.Name)
		}
	}
	slices.Sort(names)
	return names
}

// aggregationFix says how to take Stack writes out of the built-in role:
// drop the label from the roles that bring them in, else the rules.
func aggregationFix(role string, cr rbacv1.ClusterRole, through []string) string {
	instead := fmt.Sprintf("and bind ClusterRole %s only to the Stack writers you trust", manifests.StackEditorRoleName)
	switch {
	case len(through) > 0:
		return fmt.Sprintf("remove the label %s from ClusterRole %s (`kubectl label clusterrole %s %s-`), %s",
			aggregationLabel(role), strings.Join(through, ", "), strings.Join(through, " "), aggregationLabel(role), instead)
	case cr.AggregationRule != nil:
		return fmt.Sprintf("remove the label %s from the ClusterRoles that grant writes on stacks.%s, %s",
			aggregationLabel(role), v1alpha1.GroupVersion.Group, instead)
	}
	return fmt.Sprintf("remove the rules on stacks.%s from ClusterRole %s, %s", v1alpha1.GroupVersion.Group, role, instead)
}
