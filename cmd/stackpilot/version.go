package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/manifests"
)

// version is set at build time (-ldflags "-X main.version=v0.3.0"); when it
// is not, the module version or the VCS revision of the build stands in.
var version string

func (c *cli) newVersionCmd() *cobra.Command {
	var clientOnly bool
	var namespace string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the CLI's version and, when reachable, the controller's",
		Long: `Prints the CLI's version and then, when the cluster of the kubeconfig can be
reached, the controller's: the image tag of the Deployment stackpilot-controller
in --controller-namespace. When it cannot be read, a warning says why and the
exit code stays 0. --client prints only the CLI's version, without
connecting.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(c.stdout, "stackpilot %s (%s, %s/%s)\n", cliVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if clientOnly {
				return nil
			}
			line, err := c.controllerVersion(cmd.Context(), namespace)
			if err != nil {
				c.warnf("controller version unknown: %v", err)
				return nil
			}
			fmt.Fprintln(c.stdout, line)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print only the CLI's version; do not connect to the cluster.")
	cmd.Flags().StringVar(&namespace, "controller-namespace", manifests.DefaultNamespace, "Namespace of the controller's Deployment.")
	return cmd
}

// versionTimeout bounds the controller lookup: version must answer
// quickly also when the cluster is away.
const versionTimeout = 5 * time.Second

// controllerVersion is "controller <tag> (<image>, <namespace>)" from the
// controller's Deployment.
func (c *cli) controllerVersion(ctx context.Context, ns string) (string, error) {
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return "", err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = versionTimeout
	cl, err := client.New(cfg, client.Options{Scheme: kubeScheme()})
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	key := client.ObjectKey{Namespace: ns, Name: manifests.DeploymentName}
	var d appsv1.Deployment
	if err := cl.Get(ctx, key, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("no Deployment %s at %s: is Stackpilot installed (`stackpilot check`)? Else pass --controller-namespace", key, cfg.Host)
		}
		return "", fmt.Errorf("reading Deployment %s at %s: %w", key, cfg.Host, err)
	}
	image := controllerImage(&d)
	return fmt.Sprintf("controller %s (%s, namespace %s)", imageVersion(image), image, ns), nil
}

func cliVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + rev + dirty
}
