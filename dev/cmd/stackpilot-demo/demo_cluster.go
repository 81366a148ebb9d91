package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/dev/internal/cluster"
)

// demoClusterPattern matches the demo's cluster directories (short: the
// containerd socket lives there). The install test's clusters are /var/tmp/spc-*
// too, so whichever starts next cleans up after a killed one.
const (
	demoClusterParent = "/var/tmp"
	demoClusterPrefix = "spc-demo-"
	demoImageTag      = "demo"
)

// startInCluster starts a one-node cluster on this machine, builds the
// controller image and pushes it to the cluster's registry, and installs
// Stackpilot from config/cluster (config/default plus host networking), the
// way a user installs it: the controller runs as a Pod of a Deployment.
func (d *demo) startInCluster(ctx context.Context, root string) error {
	progress := d.clusterLog()
	unlock, err := cluster.LockMachine(ctx, d.out)
	if err != nil {
		return err
	}
	d.defer_("release "+cluster.MachineLockPath, func() error { unlock(); return nil })
	if err := cluster.CleanStale(filepath.Join(demoClusterParent, "spc-*"), progress); err != nil {
		return fmt.Errorf("clean up what an earlier cluster left: %w", err)
	}
	dir, err := os.MkdirTemp(demoClusterParent, demoClusterPrefix)
	if err != nil {
		return err
	}

	d.logf("Starting a one-node cluster in %s: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet from %s; containerd and runc from the machine; an image registry, all on 127.0.0.1", dir, d.bin)
	t0 := time.Now()
	c, err := cluster.Up(ctx, cluster.Options{Dir: dir, Root: root, BinDir: d.bin, Log: progress})
	if err != nil {
		_ = cluster.Down(dir, nil)
		return fmt.Errorf("%w\n%s", err, cluster.ComponentLogs(dir, 10))
	}
	d.defer_("stop the cluster and remove "+dir, c.Down)
	d.logf("  node %s Ready in %s: API server %s, registry %s", c.NodeName, since(t0), c.APIServer, c.Registry)
	if err := ctx.Err(); err != nil {
		return err
	}

	d.logf("Building the controller image (controller and runner, pulumi, the YAML language host, the Kubernetes provider; no Docker) and pushing it")
	t0 = time.Now()
	image, err := cluster.PushControllerImage(ctx, root, []string{d.bin}, filepath.Join(d.bin, ".image-cache"), c.Registry, demoImageTag)
	if err != nil {
		return err
	}
	d.logf("  %s (%s)", image, since(t0))

	d.logf("Installing Stackpilot from config/cluster (config/default: CRD, RBAC, Deployment; plus host networking for this cluster)")
	t0 = time.Now()
	inst, err := c.Install(ctx, cluster.InstallOptions{Root: root, Kubectl: filepath.Join(d.bin, "kubectl"), Image: image, Log: progress})
	if err != nil {
		d.logf("  controller Pods: %s", c.PodsSummary(context.Background(), cluster.SystemNamespace))
		return err
	}
	d.logf("  Deployment %s Available in %s; controller Pod: %s", inst.Deployment, since(t0), c.PodsSummary(ctx, cluster.SystemNamespace))

	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	if d.client, err = client.New(cfg, client.Options{Scheme: demoScheme()}); err != nil {
		return err
	}
	d.kubeconfig = c.Kubeconfig
	d.ctrl = podController{c}
	return nil
}

// clusterLog is where the cluster's own progress lines go: stderr with -v.
func (d *demo) clusterLog() io.Writer {
	if d.opts.verbose {
		return d.errOut
	}
	return io.Discard
}

// podController is the controller as the Pod of the installed Deployment.
type podController struct{ c *cluster.Cluster }

// Exited is nil: when the Pod goes, the Deployment starts another.
func (podController) Exited() <-chan struct{} { return nil }

func (p podController) LogLocation() string {
	return filepath.Join(p.c.Dir, "pod-logs", cluster.SystemNamespace+"_"+cluster.DeploymentName+"-*", "manager", "*.log")
}

func (p podController) LogTail(lines int) string {
	return cluster.Tail(p.c.ContainerLogs(cluster.SystemNamespace, "manager"), lines)
}
