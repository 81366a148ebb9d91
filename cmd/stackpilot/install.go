package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/manifests"
)

type installOptions struct {
	export   bool
	image    string
	executor string
	wait     bool
	timeout  time.Duration
	shards   int
}

func (c *cli) newInstallCmd() *cobra.Command {
	opts := installOptions{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install Stackpilot (CRDs, RBAC, the controller) into the cluster, or print its manifests",
		Long: `Applies the manifests of config/default that are built into this binary: the
CRDs (stacks, receivers, alerts.stackpilot.dev), the controller's namespace,
ServiceAccount and RBAC, its Service and Deployment, with the controller image
this CLI was built for (` + manifests.ImageRepository + `:<version>; a
development build, devel or a Go pseudo-version such as
v0.0.0-20261202100548-d440d69abcde, needs --image: no image of such a tag is
ever published).

It server-side applies them as field manager "stackpilot" (running it again
upgrades in place): the CRDs first, waiting until they are established, then
the rest, then it waits until the Deployment has rolled out (--wait=false: do
not wait).

-n sets the namespace to install into (default stackpilot-system, not the
context's namespace). --export prints the manifests instead of applying
them, for GitOps (commit them, or pipe them to kubectl apply).

The controller runs each operation as a Job (--executor=Job, the default): a
Pod in the Stack's namespace acting as the Stack's ServiceAccount, else as
that namespace's ` + manifests.RunnerServiceAccount + ` ServiceAccount, which
each namespace that runs Stacks creates (docs/guide/install.md). Since a Stack
writer then holds only its namespace's rights, Stack writes are aggregated
into the built-in edit and admin roles. --executor=Local (config/local) runs
operations as processes of the controller, which can act as the controller:
for trusted programs only; Stack writes are then granted by binding ClusterRole
` + manifests.StackEditorRoleName + ` explicitly.

--shards N adds N controllers, shard1 to shardN, beside the main one: each
serves the Stacks, Receivers and Alerts labelled sharding.fluxcd.io/key=shardK
(Deployment and Services stackpilot-controller-shardK, runner Service
stackpilot-runner-shardK), and the main controller serves everything without
that label (docs/guide/sharding.md). Running install again with fewer shards
removes the shards no longer wanted, unless a Stack, Receiver or Alert is
still labelled for one: relabel those first.`,
		Example: `  stackpilot install
  stackpilot install --export > stackpilot.yaml
  stackpilot install -n platform --image registry.example/stackpilot-controller:v0.3.0
  stackpilot install --executor=Local
  stackpilot install --shards 4`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.install(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&opts.export, "export", false, "Print the manifests on stdout instead of applying them.")
	fs.StringVar(&opts.image, "image", "", "The controller image (default: "+manifests.ImageRepository+":<this CLI's version>).")
	fs.StringVar(&opts.executor, "executor", "Job", "The controller's default executor: Job (each operation a Pod acting as the Stack's ServiceAccount; Stack writes aggregated into edit and admin) or Local (a process of the controller, for trusted programs; Stack writes granted explicitly).")
	fs.BoolVar(&opts.wait, "wait", true, "Wait until the controller's Deployment has rolled out.")
	fs.DurationVar(&opts.timeout, "timeout", 5*time.Minute, "How long to wait for the CRDs to be established, and then for the Deployments to roll out (each wait from when it begins).")
	fs.IntVar(&opts.shards, "shards", 0, "Controllers besides the main one, shard1 to shardN, each serving what is labelled sharding.fluxcd.io/key=shardK (0: one controller serves everything).")
	return cmd
}

func (c *cli) install(ctx context.Context, opts installOptions) error {
	if opts.shards < 0 || opts.shards > maxShards {
		return usageErrorf("--shards=%d: want 0 to %d", opts.shards, maxShards)
	}
	image := opts.image
	if image == "" {
		var err error
		if image, err = defaultImage(cliVersion()); err != nil {
			return err
		}
	}
	if opts.executor != "Job" && opts.executor != "Local" {
		return usageErrorf("--executor=%q: want Job or Local", opts.executor)
	}
	shards := manifests.ShardNames(opts.shards)
	ns := c.installNamespace()
	objs, err := manifests.Objects(manifests.Options{Namespace: ns, Image: image, Executor: opts.executor, Shards: shards})
	if err != nil {
		return err
	}
	if opts.export {
		out, err := manifests.YAML(objs)
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(out)
		return err
	}
	cl, err := c.kube.Client()
	if err != nil {
		return err
	}
	// --timeout bounds each wait from when it begins (the CRDs, then the
	// Deployments), as `kubectl rollout status --timeout` does: the applies
	// before it, slower on a busy API server, do not eat into it.

	// CRDs (and the namespace) first: the API server must serve the kinds
	// before anything may use them, and a CRD is usable only once
	// established.
	var first, rest, crds []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, o)
			first = append(first, o)
		case "Namespace":
			first = append(first, o)
		default:
			rest = append(rest, o)
		}
	}
	fmt.Fprintf(c.stderr, "► installing Stackpilot (%s, executor %s%s) into namespace %s\n", image, opts.executor, shardsNote(shards), ns)
	// Refused before anything is applied: a shard still serving labelled
	// objects is not removed, and nothing is half-installed.
	gone, err := unwantedShards(ctx, cl, ns, shards)
	if err != nil {
		return err
	}
	if err := c.applyManifests(ctx, cl, first); err != nil {
		return err
	}
	if err := waitAll(ctx, opts.timeout, crdNames(crds), func(ctx context.Context, name string) error {
		return waitEstablished(ctx, cl, name)
	}); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "✔ CRDs established\n")
	if err := c.applyManifests(ctx, cl, rest); err != nil {
		return err
	}
	if err := c.removeShards(ctx, cl, gone); err != nil {
		return err
	}
	if !opts.wait {
		fmt.Fprintf(c.stderr, "✔ installed; not waiting for the controller (check with `stackpilot check`)\n")
		return nil
	}
	fmt.Fprintf(c.stderr, "◎ waiting for the controller to roll out\n")
	if err := waitAll(ctx, opts.timeout, append([]string{manifests.DeploymentName}, shardDeployments(shards)...), func(ctx context.Context, name string) error {
		return waitDeployment(ctx, cl, client.ObjectKey{Namespace: ns, Name: name})
	}); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "✔ the controller is ready; Stackpilot is installed\n")
	return nil
}

// applyManifests server-side applies objs one by one, forcing ownership of the fields
// it sets: install is the owner of what config/default declares.
func (c *cli) applyManifests(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(adminFieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", manifestName(o), err)
		}
		fmt.Fprintf(c.stderr, "✔ %s applied\n", manifestName(o))
	}
	return nil
}

// waitAll waits for each of names in turn, all of them within timeout from
// now.
func waitAll(ctx context.Context, timeout time.Duration, names []string, wait func(context.Context, string) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, name := range names {
		if err := wait(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

func crdNames(crds []*unstructured.Unstructured) []string {
	names := make([]string, len(crds))
	for i, crd := range crds {
		names[i] = crd.GetName()
	}
	return names
}

// waitEstablished polls the CRD until its Established condition is True.
func waitEstablished(ctx context.Context, cl client.Client, name string) error {
	for {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		err := cl.Get(ctx, client.ObjectKey{Name: name}, crd)
		if err == nil && crdCondition(crd, "Established") == "True" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s is not established: see `kubectl describe crd %s`", name, name)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// crdCondition is the status of the CRD's condition of type typ, "" when absent.
func crdCondition(crd *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
