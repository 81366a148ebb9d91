package main

import (
	"context"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/dev/internal/controllerproc"
	"github.com/stackpilot/stackpilot/internal/controlplane"
)

// startAsProcess starts a control plane without nodes (etcd, kube-apiserver,
// kube-controller-manager) and the controller as a process beside it.
func (d *demo) startAsProcess(ctx context.Context, root string) error {
	// Build the controller while the control plane starts: both take a while.
	ctrlBin := d.opts.controllerBin
	if ctrlBin == "" {
		ctrlBin = filepath.Join(d.bin, "stackpilot-controller")
	}
	d.logf("Building the controller (./cmd/controller) into %s, in the background", ctrlBin)
	built := make(chan error, 1)
	buildStart := time.Now()
	go func() { built <- controllerproc.Build(ctx, root, ctrlBin) }()

	d.logf("Starting the control plane: etcd, kube-apiserver, kube-controller-manager (garbage collector) from %s", d.bin)
	t0 := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir:  d.bin,
		Dir:     filepath.Join(d.tmp, "controlplane"),
		CRDDirs: []string{filepath.Join(root, "config", "crd", "bases")},
	})
	if err != nil {
		<-built
		return err
	}
	d.defer_("stop the control plane", cp.Stop)
	if d.client, err = client.New(cp.Config, client.Options{Scheme: demoScheme()}); err != nil {
		<-built
		return err
	}
	d.kubeconfig = cp.Kubeconfig
	d.logf("  control plane ready in %s: %s (logs in %s)", since(t0), cp.Host, cp.Dir)
	if err := <-built; err != nil {
		return err
	}
	d.logf("  controller built in %s", since(buildStart))
	if err := ctx.Err(); err != nil {
		return err
	}

	d.logf("Starting the controller")
	t0 = time.Now()
	ctrl, err := controllerproc.Start(ctx, controllerproc.Config{
		Binary:     ctrlBin,
		BinDir:     d.bin,
		Kubeconfig: cp.Kubeconfig,
		DataDir:    filepath.Join(d.tmp, "data"),
		LogPath:    filepath.Join(d.tmp, "controller.log"),
		Verbose:    d.verboseWriter(),
	})
	if err != nil {
		return err
	}
	d.ctrl = processController{ctrl}
	d.defer_("stop the controller", ctrl.Stop)
	d.logf("  controller ready in %s (pid %d, metrics http://%s/metrics, log %s)", since(t0), ctrl.Pid(), ctrl.MetricsAddr, ctrl.LogPath)
	return nil
}

// processController is the controller as a process of the demo's.
type processController struct{ *controllerproc.Process }

func (p processController) LogLocation() string { return p.LogPath }

func (p processController) LogTail(lines int) string {
	return controllerproc.TailFile(p.LogPath, lines)
}
