package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/manifests"
)

type uninstallOptions struct {
	yes      bool
	keepCRDs bool
	timeout  time.Duration
}

func (c *cli) newUninstallCmd() *cobra.Command {
	opts := uninstallOptions{}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Delete every Stack, then remove Stackpilot from the cluster",
		Long: `Removes what install applied, in an order that lets the controller finish:

  1. lists the Stacks of every namespace, naming those with
     spec.destroyOnDelete (deleting them destroys their Pulumi stack's
     resources), and asks before going on (--yes: do not ask);
  2. deletes every Stack and waits until the controller has finalized them
     (destroyed where asked, finalizer removed); it refuses to start when the
     controller is not ready, as their finalizers would then never go;
  3. deletes the controller's Deployment, Service, RBAC and namespace, and the
     CRDs (--keep-crds keeps them; deleting them deletes every Receiver and
     Alert).

-n names the namespace Stackpilot was installed into (default
stackpilot-system).`,
		Example: `  stackpilot uninstall
  stackpilot uninstall --yes --keep-crds`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.uninstall(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&opts.yes, "yes", "y", false, "Do not ask before deleting.")
	fs.BoolVar(&opts.keepCRDs, "keep-crds", false, "Keep the CRDs (and so every Receiver and Alert).")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "How long to wait for the Stacks to be finalized.")
	return cmd
}

func (c *cli) uninstall(ctx context.Context, opts uninstallOptions) error {
	ns := c.installNamespace()
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return err
	}
	cl, err := c.kube.Client()
	if err != nil {
		return err
	}
	stacks, err := listAllStacks(ctx, cl)
	if err != nil {
		return err
	}
	c.describeUninstall(cfg.Host, ns, stacks, opts)
	if !opts.yes {
		if err := c.askUninstall("Uninstall Stackpilot? [y/N] "); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	if err := c.deleteStacks(ctx, cl, ns, stacks); err != nil {
		return err
	}
	objs, err := manifests.Objects(manifests.Options{Namespace: ns})
	if err != nil {
		return err
	}
	// Reverse order: the Deployment first, so nothing acts while its RBAC
	// goes; the CRDs and the namespace last.
	slices.Reverse(objs)
	for _, o := range objs {
		if opts.keepCRDs && o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		err := cl.Delete(ctx, o, client.PropagationPolicy("Background"))
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			fmt.Fprintf(c.stderr, "✔ %s already gone\n", manifestName(o))
		case apierrors.IsConflict(err) && o.GetKind() == "Namespace":
			// A namespace being emptied refuses a second delete.
			fmt.Fprintf(c.stderr, "✔ %s already being deleted\n", manifestName(o))
		case err != nil:
			return fmt.Errorf("deleting %s: %w", manifestName(o), err)
		default:
			fmt.Fprintf(c.stderr, "✔ %s deleted\n", manifestName(o))
		}
	}
	fmt.Fprintf(c.stderr, "✔ Stackpilot is uninstalled\n")
	return nil
}

// listAllStacks is every Stack in the cluster; none when the CRD is gone.
func listAllStacks(ctx context.Context, cl client.Client) ([]v1alpha1.Stack, error) {
	var list v1alpha1.StackList
	err := cl.List(ctx, &list)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the Stacks of every namespace (you need list on stacks.stackpilot.dev cluster-wide): %w", err)
	}
	return list.Items, nil
}

// describeUninstall says on stderr what will go, the Stacks that destroy
// their resources by name.
func (c *cli) describeUninstall(host, ns string, stacks []v1alpha1.Stack, opts uninstallOptions) {
	crds := "and the CRDs stacks, receivers and alerts.stackpilot.dev (with every Receiver and Alert)"
	if opts.keepCRDs {
		crds = "but not the CRDs (--keep-crds)"
	}
	fmt.Fprintf(c.stderr, "This deletes %d Stack(s), then removes Stackpilot from %s: the controller in namespace %s, its RBAC, %s.\n", len(stacks), host, ns, crds)
	var destroying []string
	for _, s := range stacks {
		if s.Spec.DestroyOnDelete {
			destroying = append(destroying, fmt.Sprintf("  %s/%s (Pulumi stack %s)", s.Namespace, s.Name, s.GetStackName()))
		}
	}
	if len(destroying) > 0 {
		fmt.Fprintf(c.stderr, "These %d Stack(s) have destroyOnDelete: deleting them DESTROYS their Pulumi stack's resources:\n%s\n", len(destroying), strings.Join(destroying, "\n"))
	}
}

// askUninstall asks on stderr and reads the answer from stdin (a terminal or a
// pipe: `yes | stackpilot uninstall` works); only y or yes goes on.
func (c *cli) askUninstall(prompt string) error {
	fmt.Fprint(c.stderr, prompt)
	line, err := bufio.NewReader(c.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	if !isTerminal(c.stdin) {
		fmt.Fprintln(c.stderr, answer)
	}
	if answer == "" && errors.Is(err, io.EOF) {
		return &exitError{code: 1, msg: "no answer on stdin, nothing was deleted: pass --yes to uninstall without asking"}
	}
	if answer != "y" && answer != "yes" {
		return &exitError{code: 1, msg: "uninstall cancelled, nothing was deleted"}
	}
	return nil
}

// deleteStacks deletes every Stack and waits until they are gone. Stacks
// with a finalizer need the controller: without it they would hang in
// deletion (and destroyOnDelete would not run), so it refuses up front.
func (c *cli) deleteStacks(ctx context.Context, cl client.Client, ns string, stacks []v1alpha1.Stack) error {
	if len(stacks) == 0 {
		return nil
	}
	finalized := 0
	for _, s := range stacks {
		if len(s.Finalizers) > 0 {
			finalized++
		}
	}
	if finalized > 0 {
		key := client.ObjectKey{Namespace: ns, Name: manifests.DeploymentName}
		var d appsv1.Deployment
		ready, detail := false, "not found"
		if err := cl.Get(ctx, key, &d); err == nil {
			ready, detail = deploymentState(&d)
		} else if !apierrors.IsNotFound(err) {
			detail = err.Error()
		}
		if !ready {
			return fmt.Errorf("the controller (Deployment %s) is not ready (%s), so %d Stack(s) could not be finalized; nothing was deleted: start it (see `stackpilot check`), or pass -n if it runs elsewhere", key, detail, finalized)
		}
	}
	for i := range stacks {
		s := &stacks[i]
		if err := cl.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Stack %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	fmt.Fprintf(c.stderr, "◎ waiting for %d Stack(s) to be finalized\n", len(stacks))
	for {
		left, err := listAllStacks(ctx, cl)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			fmt.Fprintf(c.stderr, "✔ every Stack is deleted\n")
			return nil
		}
		select {
		case <-ctx.Done():
			names := make([]string, 0, len(left))
			for _, s := range left {
				names = append(names, s.Namespace+"/"+s.Name)
			}
			return fmt.Errorf("%d Stack(s) still being deleted (%s); nothing else was removed: see their Ready message (`kubectl get stacks -A`) and the controller's logs, then run uninstall again", len(left), strings.Join(names, ", "))
		case <-time.After(time.Second):
		}
	}
}
