package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/manifests"
)

// minKubernetes is the oldest API server Stackpilot supports: its CRDs
// validate with CEL rules (x-kubernetes-validations), GA in 1.29.
const minKubernetes = "1.29.0"

// requiredCRDs are the kinds the controller serves, each at v1alpha1.
var requiredCRDs = []string{"stacks.stackpilot.dev", "receivers.stackpilot.dev", "alerts.stackpilot.dev"}

type checkOptions struct {
	pre       bool
	namespace string
}

func (c *cli) newCheckCmd() *cobra.Command {
	opts := checkOptions{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the cluster's prerequisites and the Stackpilot installation",
		Long: `Checks, like flux check, one line per finding and, for each problem, the fix:

  - the API server's version (at least ` + minKubernetes + `);
  - the CRDs stacks, receivers and alerts.stackpilot.dev: present, established
    and serving ` + v1alpha1.GroupVersion.Version + `;
  - the controller's Deployment in --controller-namespace: rolled out, and its
    version (the image tag);
  - the controller's permissions: for every rule of its ClusterRole and
    Roles as this CLI installs them, a SubjectAccessReview as its
    ServiceAccount (you need create on subjectaccessreviews); skipped, in one
    line, when that ServiceAccount does not exist;
  - who holds the controller's rights: with the Job executor as the default
    (--default-executor=Job, what stackpilot install sets) a Stack writer acts
    only as the Stack's ServiceAccount, and a ⚠ line names the Stacks outside
    the controller's namespace that still run with Local; with Local as the
    default whoever may create, update or patch a Stack can act as the
    controller (a ⚠ line says so, and names the Stacks of other namespaces it
    serves), and the built-in admin, edit and view roles must not grant that.

--pre checks only the prerequisites (the API server), before an install.

Exit codes:
  0  every check passed
  1  a check failed (the lines marked ✗ say what to do)
  2  usage error`,
		Example: `  stackpilot check --pre
  stackpilot check
  stackpilot check --controller-namespace platform`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.check(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&opts.pre, "pre", false, "Check only the prerequisites (the API server's version).")
	fs.StringVar(&opts.namespace, "controller-namespace", manifests.DefaultNamespace, "Namespace of the controller's Deployment.")
	return cmd
}

// checkReport prints findings and counts the failures; a warning (⚠) is
// something to know that fails nothing.
type checkReport struct {
	w      io.Writer
	failed int
}

func (r *checkReport) section(s string) { fmt.Fprintf(r.w, "► %s\n", s) }
func (r *checkReport) ok(format string, args ...any) {
	fmt.Fprintf(r.w, "✔ %s\n", fmt.Sprintf(format, args...))
}

func (r *checkReport) warn(format string, args ...any) {
	fmt.Fprintf(r.w, "⚠ %s\n", fmt.Sprintf(format, args...))
}

// fail is one problem and, after the colon, what fixes it.
func (r *checkReport) fail(problem, fix string) {
	r.failed++
	fmt.Fprintf(r.w, "✗ %s: %s\n", problem, fix)
}

func (c *cli) check(ctx context.Context, opts checkOptions) error {
	if opts.namespace == "" {
		return usageErrorf("--controller-namespace must not be empty")
	}
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return err
	}
	r := &checkReport{w: c.stdout}
	r.section("checking prerequisites")
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	checkServerVersion(r, dc, cfg.Host)
	if r.failed == 0 && opts.pre {
		r.ok("prerequisites checks passed")
		return nil
	}
	if !opts.pre {
		cl, err := c.kube.Client()
		if err != nil {
			return err
		}
		r.section("checking CRDs")
		for _, name := range requiredCRDs {
			checkCRD(ctx, r, cl, name)
		}
		r.section("checking the controller")
		found := checkController(ctx, r, cl, opts.namespace)
		r.section("checking the controller's permissions")
		checkPermissions(ctx, r, cl, opts.namespace, found)
		r.section("checking who holds the controller's rights")
		checkStackWriters(ctx, r, cl, opts.namespace, found)
		if r.failed == 0 {
			r.ok("all checks passed")
			return nil
		}
	}
	return &exitError{code: 1, msg: fmt.Sprintf("%d check(s) failed; the lines marked ✗ say what to do", r.failed)}
}

func checkServerVersion(r *checkReport, dc discovery.DiscoveryInterface, host string) {
	info, err := dc.ServerVersion()
	if err != nil {
		r.fail(fmt.Sprintf("cannot read the API server's version at %s (%v)", host, err), "check the kubeconfig's server and credentials (`kubectl version`)")
		return
	}
	v, err := utilversion.ParseGeneric(info.GitVersion)
	if err != nil {
		r.fail(fmt.Sprintf("the API server reports version %q, which is not a version", info.GitVersion), "run Kubernetes "+minKubernetes+" or later")
		return
	}
	if !v.AtLeast(utilversion.MustParseGeneric(minKubernetes)) {
		r.fail(fmt.Sprintf("Kubernetes %s is older than %s", info.GitVersion, minKubernetes), "upgrade the cluster to Kubernetes "+minKubernetes+" or later")
		return
	}
	r.ok("Kubernetes %s >= %s", info.GitVersion, minKubernetes)
}

func checkCRD(ctx context.Context, r *checkReport, cl client.Client, name string) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	err := cl.Get(ctx, client.ObjectKey{Name: name}, crd)
	switch {
	case apierrors.IsNotFound(err):
		r.fail("CRD "+name+" not found", "install Stackpilot: `stackpilot install` (or apply `stackpilot install --export`)")
		return
	case err != nil:
		r.fail(fmt.Sprintf("cannot read CRD %s (%v)", name, err), "you need get on customresourcedefinitions.apiextensions.k8s.io")
		return
	}
	want := v1alpha1.GroupVersion.Version
	served := false
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["name"] == want && m["served"] == true {
			served = true
		}
	}
	switch {
	case !served:
		r.fail(fmt.Sprintf("CRD %s does not serve %s", name, want), "upgrade the CRDs: `stackpilot install`")
	case crdCondition(crd, "Established") != "True":
		r.fail("CRD "+name+" is not established", "see `kubectl describe crd "+name+"`")
	default:
		r.ok("%s/%s", name, want)
	}
}

// foundController is what checkController found: the ServiceAccount the
// controller's Pods run as (the installed default when it cannot tell), and
// whether its Deployment exists.
type foundController struct {
	serviceAccount string
	deployment     bool
	// flags are the manager container's flags as written (runner.go's
	// controllerFlags), nil without a Deployment.
	flags map[string]string
}

// checkController reports the Deployment.
func checkController(ctx context.Context, r *checkReport, cl client.Client, ns string) foundController {
	key := client.ObjectKey{Namespace: ns, Name: manifests.DeploymentName}
	var d appsv1.Deployment
	err := cl.Get(ctx, key, &d)
	switch {
	case apierrors.IsNotFound(err):
		r.fail(fmt.Sprintf("no controller Deployment %s", key), "install Stackpilot: `stackpilot install` (or, if it is elsewhere, pass --controller-namespace)")
		return foundController{serviceAccount: manifests.ServiceAccount}
	case err != nil:
		r.fail(fmt.Sprintf("cannot read the controller Deployment %s (%v)", key, err), "you need get on deployments.apps in "+ns)
		return foundController{serviceAccount: manifests.ServiceAccount, deployment: true}
	}
	image := controllerImage(&d)
	ready, detail := deploymentState(&d)
	if !ready {
		r.fail(fmt.Sprintf("controller %s (%s) is not ready: %s", key, image, detail),
			fmt.Sprintf("see `kubectl -n %s describe deployment %s` and `kubectl -n %s logs deployment/%s`", ns, key.Name, ns, key.Name))
	} else {
		r.ok("controller %s %s (%s, %s)", key, imageVersion(image), image, detail)
	}
	found := foundController{serviceAccount: "default", deployment: true, flags: controllerFlags(&d)}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "" {
		found.serviceAccount = sa
	}
	return found
}

// permission is one thing the controller must be allowed: verb on
// resource in group, cluster-wide (namespace "") or in one namespace, on
// every object or on the one named.
type permission struct {
	namespace, group, resource, verb, name string
}

// neededPermissions are the rules of the ClusterRole and the Roles that the
// embedded manifests grant the controller's ServiceAccount: what it needs.
func neededPermissions(ns string) ([]permission, error) {
	objs, err := manifests.Objects(manifests.Options{Namespace: ns})
	if err != nil {
		return nil, err
	}
	var perms []permission
	for _, o := range objs {
		scope := ""
		switch {
		case o.GetKind() == "ClusterRole" && o.GetName() == manifests.ClusterRoleName:
		case o.GetKind() == "Role":
			scope = o.GetNamespace()
		default:
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			return nil, fmt.Errorf("embedded %s: %w", manifestName(o), err)
		}
		for _, rule := range role.Rules {
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						for _, name := range names {
							perms = append(perms, permission{scope, g, res, v, name})
						}
					}
				}
			}
		}
	}
	return perms, nil
}

// checkPermissions asks, per permission, whether the controller's
// ServiceAccount has it. When that ServiceAccount does not exist the answers
// would only say that nothing is bound to a name: one line says what was
// found instead (a controller run as a process, outside the cluster, acts
// with its kubeconfig's rights, which check cannot know).
func checkPermissions(ctx context.Context, r *checkReport, cl client.Client, ns string, found foundController) {
	sa := found.serviceAccount
	var account corev1.ServiceAccount
	err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, &account)
	switch {
	case apierrors.IsNotFound(err) && !found.deployment:
		r.warn("no ServiceAccount %s/%s either: the controller is not installed in namespace %s, so its permissions are not checked "+
			"(a controller run outside the cluster acts with its kubeconfig's rights)", ns, sa, ns)
		return
	case apierrors.IsNotFound(err):
		r.fail(fmt.Sprintf("ServiceAccount %s/%s, which the controller's Deployment runs as, does not exist, so its permissions are not checked", ns, sa),
			"apply the controller's RBAC again: `stackpilot install`")
		return
	}
	perms, err := neededPermissions(ns)
	if err != nil {
		r.fail(err.Error(), "this CLI's build is broken: report it")
		return
	}
	user := "system:serviceaccount:" + ns + ":" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	// Missing verbs, grouped per resource and scope: one line each.
	missing := map[string][]string{}
	for _, p := range perms {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: p.namespace, Group: p.group, Resource: p.resource, Verb: p.verb, Name: p.name},
		}}
		if err := cl.Create(ctx, sar); err != nil {
			r.fail(fmt.Sprintf("cannot check the controller's permissions (%v)", err), "you need create on subjectaccessreviews.authorization.k8s.io")
			return
		}
		if !sar.Status.Allowed {
			res := p.resource
			if p.group != "" {
				res += "." + p.group
			}
			if p.name != "" {
				res += " " + p.name
			}
			if p.namespace != "" {
				res += " in namespace " + p.namespace
			}
			missing[res] = append(missing[res], p.verb)
		}
	}
	if len(missing) == 0 {
		r.ok("ServiceAccount %s/%s has the %d permissions the controller needs", ns, sa, len(perms))
		return
	}
	keys := make([]string, 0, len(missing))
	for k := range missing {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.fail(fmt.Sprintf("ServiceAccount %s/%s may not %s %s", ns, sa, strings.Join(missing[k], ", "), k),
			"apply the controller's RBAC again: `stackpilot install` (ClusterRole "+manifests.ClusterRoleName+" and its bindings)")
	}
}
