package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/internal/toolchain"
)

// The sample: a Pulumi YAML program that the demo commits to its Git server,
// and the objects it applies (a namespace, two Secrets and the Stack).
var (
	//go:embed demo/program/Pulumi.yaml
	demoProgram []byte
	//go:embed demo/stack.yaml
	demoManifests string
	// demoClusterManifests are added in cluster mode: the controller's
	// ServiceAccount may manage the demo namespace.
	//go:embed demo/rbac.yaml
	demoClusterManifests string
)

const (
	demoNamespace  = "demo"
	demoStackName  = "cluster-metadata"
	demoRepo       = "platform"         // served as <git server>/platform.git
	demoProgramDir = "cluster-metadata" // spec.source.dir
	demoBranch     = "main"
)

// demoTools are the pinned binaries the demo runs, all built by `make tools`
// (cluster mode also needs kube-scheduler and kubelet; see
// clusterRequirements).
var demoTools = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kubectl",
	"pulumi", "pulumi-language-yaml", "pulumi-resource-kubernetes",
}

// Where the demo runs Stackpilot.
const (
	// modeAuto picks modeCluster when the machine allows it, else modeProcess.
	modeAuto = "auto"
	// modeCluster starts a one-node cluster (dev/internal/cluster), builds the
	// controller image, installs config/cluster and the controller runs as a Pod.
	modeCluster = "cluster"
	// modeProcess starts a control plane without nodes and runs the controller
	// as a process beside it.
	modeProcess = "process"
)

// errInterrupted is the error of a demo stopped by a signal before it was
// up (and of every --once run stopped by one).
var errInterrupted = errors.New("interrupted")

type demoOptions struct {
	// once exits after the Stack is Ready and the results are printed and checked.
	once bool
	// timeout bounds the wait for Ready.
	timeout time.Duration
	// verbose copies the controller's log to stderr.
	verbose bool
	// controllerBin is where the controller is built (process mode);
	// <bin>/stackpilot-controller when empty.
	controllerBin string
	// mode is modeAuto, modeCluster or modeProcess.
	mode string
}

// newDemoCmd is the whole command line; the flags are the ones of the CLI's
// former `stackpilot demo` verb.
func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	var opts demoOptions
	cmd := &cobra.Command{
		Use: "stackpilot-demo [--mode auto|cluster|process] [--once] [--timeout 10m] [-v]",
		// The use line lists the flags.
		DisableFlagsInUseLine: true,
		Short:                 "Run Stackpilot with a sample Stack: as a Pod in a one-node cluster on this machine, or as a process (run it in a clone of the repository)",
		Long: `Runs Stackpilot on this machine: in a one-node Kubernetes cluster (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet from bin/, containerd), installed from
config/ as a Pod, or as a process beside a control plane without nodes; serves a sample
Pulumi program from a local Git server, applies a Stack for it and shows what the
controller did.

It needs a clone of the Stackpilot repository: it builds the controller and installs
config/ from it, with the tools of ` + "`make tools`" + ` in bin/ (or $STACKPILOT_BIN).
Run it there after ` + "`make tools`; `make demo`" + ` does both.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected arguments: %q", args)
			}
			return nil
		},
		RunE: func(_ *cobra.Command, _ []string) error {
			switch opts.mode {
			case modeAuto, modeCluster, modeProcess:
			default:
				return usageErrorf("--mode %q: want auto, cluster or process", opts.mode)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				// After the first signal, the next one ends the process at once.
				<-ctx.Done()
				stop()
			}()
			return runDemo(ctx, opts, stdout, stderr)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&opts.once, "once", false, "Exit (cleaning up) once the sample Stack is Ready and its results are printed and checked; fail if they are not as expected. For tests and CI.")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "How long to wait for the sample Stack to become Ready.")
	fs.BoolVarP(&opts.verbose, "v", "v", false, "Copy the controller's log (process mode) or the cluster's progress (cluster mode) to stderr.")
	fs.StringVar(&opts.mode, "mode", modeAuto, "Where Stackpilot runs: cluster (a one-node cluster on this machine, the controller installed from config/ as a Pod; needs root, containerd, runc), process (the controller as a process beside a control plane without nodes), or auto (cluster when this machine allows it, else process, saying why).")
	return cmd
}

// demo is one run: what it started, in order, so that it can all be stopped.
type demo struct {
	opts   demoOptions
	out    io.Writer
	errOut io.Writer
	start  time.Time

	bin, tmp string
	git      *gitServer
	// mode is where Stackpilot runs (modeCluster or modeProcess), and the
	// rest is what the demo looks at, wherever that is.
	mode       string
	client     client.Client
	kubeconfig string
	ctrl       controllerHandle

	cleanups []cleanup
}

// controllerHandle is how the demo follows the controller, wherever it runs.
type controllerHandle interface {
	// Exited is closed when the controller is gone for good; nil when a
	// Deployment brings it back.
	Exited() <-chan struct{}
	// LogLocation says where its log is.
	LogLocation() string
	// LogTail is the end of its log.
	LogTail(lines int) string
}

type cleanup struct {
	what string
	fn   func() error
}

// demoScheme has the core types and Stackpilot's.
func demoScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return scheme
}

// runDemo runs the whole demo and undoes everything it started before returning.
func runDemo(ctx context.Context, opts demoOptions, stdout, stderr io.Writer) (err error) {
	d := &demo{opts: opts, out: stdout, errOut: stderr, start: time.Now()}
	// The demo's clients log nothing worth showing; without a logger
	// controller-runtime complains (with a stack trace) after 30 seconds.
	ctrllog.SetLogger(logr.Discard())
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = errInterrupted
		}
		if err != nil && err != errInterrupted && d.ctrl != nil {
			d.diagnose()
		}
		d.cleanUp()
		if err == nil {
			d.logf("Done in %s.", d.elapsed())
		}
	}()

	root, err := toolchain.ModuleRoot()
	if err != nil {
		return fmt.Errorf("the demo builds the controller and installs it from the source: %w; run it from a clone of the Stackpilot repository (`make demo` builds the tools and runs it)", err)
	}
	if d.bin, err = toolchain.BinDir(); err != nil {
		return err
	}
	if err := toolchain.Require(d.bin, demoTools...); err != nil {
		return err
	}
	if d.mode, err = d.pickMode(); err != nil {
		return err
	}
	if d.tmp, err = os.MkdirTemp("", "stackpilot-demo-"); err != nil {
		return err
	}
	d.defer_("remove "+d.tmp, func() error { return os.RemoveAll(d.tmp) })

	d.logf("Serving the sample program from a local Git server")
	if d.git, err = startGitServer(filepath.Join(d.tmp, "git"), filepath.Join(d.tmp, "git-server.log")); err != nil {
		return err
	}
	d.defer_("stop the Git server", func() error { d.git.Stop(); return nil })
	commit, err := d.git.Commit(demoRepo, demoBranch, map[string]string{demoProgramDir + "/Pulumi.yaml": string(demoProgram)}, "Add the cluster-metadata program")
	if err != nil {
		return err
	}
	d.logf("  %s (branch %s, commit %s, program in %s/)", d.git.URL(demoRepo), demoBranch, commit[:12], demoProgramDir)

	manifests := demoManifestsFor(d.git.URL(demoRepo))
	switch d.mode {
	case modeCluster:
		err = d.startInCluster(ctx, root)
		manifests += "\n---\n" + demoClusterManifests
	default:
		err = d.startAsProcess(ctx, root)
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	d.logf("Applying the sample (namespace %s, Secrets pulumi-passphrase and registry-credentials, Stack %s)", demoNamespace, demoStackName)
	if err := applyManifests(ctx, d.client, manifests); err != nil {
		return err
	}

	d.logf("Waiting for the Stack to become Ready (at most %s)", opts.timeout)
	t0 := time.Now()
	key := client.ObjectKey{Namespace: demoNamespace, Name: demoStackName}
	stack, err := d.waitReady(ctx, key, commit)
	if err != nil {
		return err
	}
	d.logf("  Ready in %s", since(t0))

	if err := d.report(ctx, stack); err != nil {
		return err
	}
	if err := verifyDemo(ctx, d.client, stack, commit); err != nil {
		return fmt.Errorf("the sample Stack is Ready but its results are not as expected: %w", err)
	}
	d.logf("Checked: the Stack is Ready at %s, ConfigMap %s/cluster-metadata holds the cluster metadata, and the outputs are published (the secret one only to the Secret).", commit[:12], demoNamespace)

	if opts.once {
		return nil
	}
	d.hints()
	return d.watch(ctx, key)
}

// pickMode resolves --mode: cluster when asked for or when auto and the
// machine allows it; process otherwise, saying why.
func (d *demo) pickMode() (string, error) {
	why := clusterRequirements(d.bin)
	switch d.opts.mode {
	case modeProcess:
		return modeProcess, nil
	case modeCluster:
		if why != nil {
			return "", fmt.Errorf("--mode cluster: this machine cannot run the one-node cluster: %w", why)
		}
		return modeCluster, nil
	}
	if why != nil {
		d.logf("Running the controller as a process beside a control plane without nodes, not as a Pod in a cluster: %v", why)
		return modeProcess, nil
	}
	return modeCluster, nil
}

// clusterRequirements says why this machine cannot run the one-node cluster
// (nil: it can): not root, containerd/runc/CNI plugins missing, or tools
// missing from bin.
func clusterRequirements(bin string) error {
	if err := cluster.Requirements(); err != nil {
		return err
	}
	return toolchain.Require(bin, toolchain.ClusterTools...)
}

// defer_ records an undo step; cleanUp runs them newest first.
func (d *demo) defer_(what string, fn func() error) {
	d.cleanups = append(d.cleanups, cleanup{what, fn})
}

func (d *demo) cleanUp() {
	if len(d.cleanups) == 0 {
		return
	}
	d.logf("Cleaning up")
	for i := len(d.cleanups) - 1; i >= 0; i-- {
		c := d.cleanups[i]
		t0 := time.Now()
		if err := c.fn(); err != nil {
			fmt.Fprintf(d.errOut, "stackpilot-demo: %s: %v\n", c.what, err)
			continue
		}
		d.logf("  %s (%s)", c.what, since(t0))
	}
	d.cleanups = nil
}

func (d *demo) verboseWriter() io.Writer {
	if d.opts.verbose {
		return d.errOut
	}
	return nil
}

func (d *demo) elapsed() string { return since(d.start) }

// logf prints a progress line, stamped with the time since the demo started.
func (d *demo) logf(format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
