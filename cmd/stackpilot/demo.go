package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// The sample: a Pulumi YAML program that the demo commits to its Git server,
// and the objects it applies (a namespace, two Secrets and the Stack).
var (
	//go:embed demo/program/Pulumi.yaml
	demoProgram []byte
	//go:embed demo/stack.yaml
	demoManifests string
)

const (
	demoNamespace  = "demo"
	demoStackName  = "cluster-metadata"
	demoRepo       = "platform"         // served as <git server>/platform.git
	demoProgramDir = "cluster-metadata" // spec.source.dir
	demoBranch     = "main"
)

// demoTools are the pinned binaries the demo runs, all built by `make tools`.
var demoTools = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kubectl",
	"pulumi", "pulumi-language-yaml", "pulumi-resource-kubernetes",
}

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
	// controllerBin is where the controller is built; <bin>/stackpilot-controller when empty.
	controllerBin string
}

func demoMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stackpilot demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts demoOptions
	fs.BoolVar(&opts.once, "once", false, "Exit (cleaning up) once the sample Stack is Ready and its results are printed and checked; fail if they are not as expected. For tests and CI.")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "How long to wait for the sample Stack to become Ready.")
	fs.BoolVar(&opts.verbose, "v", false, "Copy the controller's log to stderr.")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: stackpilot demo [--once] [--timeout 10m] [-v]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs Stackpilot on a local control plane (etcd, kube-apiserver, kube-controller-manager")
		fmt.Fprintln(stderr, "from bin/), serves a sample Pulumi program from a local Git server, applies a Stack")
		fmt.Fprintln(stderr, "for it and shows what the controller did. Run it from the repository after `make tools`.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "stackpilot demo: unexpected arguments: %q\n", fs.Args())
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, the next one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	if err := runDemo(ctx, opts, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "stackpilot demo:", err)
		return 1
	}
	return 0
}

// demo is one run: what it started, in order, so that it can all be stopped.
type demo struct {
	opts   demoOptions
	out    io.Writer
	errOut io.Writer
	start  time.Time

	bin, tmp string
	env      *testenv.Env
	git      *gitServer
	ctrl     *testenv.ControllerProcess

	cleanups []cleanup
}

type cleanup struct {
	what string
	fn   func() error
}

func demoScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return scheme
}

// runDemo runs the whole demo and undoes everything it started before returning.
func runDemo(ctx context.Context, opts demoOptions, stdout, stderr io.Writer) (err error) {
	d := &demo{opts: opts, out: stdout, errOut: stderr, start: time.Now()}
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

	root, err := testenv.ModuleRoot()
	if err != nil {
		return fmt.Errorf("%w (run the demo from the Stackpilot repository: `make demo`)", err)
	}
	if d.bin, err = testenv.BinDir(); err != nil {
		return err
	}
	if err := testenv.RequireBinaries(d.bin, demoTools...); err != nil {
		return err
	}
	if d.tmp, err = os.MkdirTemp("", "stackpilot-demo-"); err != nil {
		return err
	}
	d.defer_("remove "+d.tmp, func() error { return os.RemoveAll(d.tmp) })

	// Build the controller while the control plane starts: both take a while.
	ctrlBin := opts.controllerBin
	if ctrlBin == "" {
		ctrlBin = filepath.Join(d.bin, "stackpilot-controller")
	}
	d.logf("Building the controller (./cmd/controller) into %s, in the background", ctrlBin)
	built := make(chan error, 1)
	buildStart := time.Now()
	go func() { built <- testenv.BuildController(ctx, root, ctrlBin) }()

	d.logf("Starting the control plane: etcd, kube-apiserver, kube-controller-manager (garbage collector) from %s", d.bin)
	t0 := time.Now()
	env, err := testenv.Start(testenv.Options{Scheme: demoScheme()})
	if err != nil {
		<-built
		return err
	}
	d.env = env
	d.defer_("stop the control plane", env.Stop)
	d.logf("  control plane ready in %s: %s", since(t0), env.Config.Host)
	if err := ctx.Err(); err != nil {
		<-built
		return err
	}

	d.logf("Serving the sample program from a local Git server")
	if d.git, err = startGitServer(filepath.Join(d.tmp, "git"), filepath.Join(d.tmp, "git-server.log")); err != nil {
		<-built
		return err
	}
	d.defer_("stop the Git server", func() error { d.git.Stop(); return nil })
	commit, err := d.git.Commit(demoRepo, demoBranch, map[string][]byte{demoProgramDir + "/Pulumi.yaml": demoProgram}, "Add the cluster-metadata program")
	if err != nil {
		<-built
		return err
	}
	d.logf("  %s (branch %s, commit %s, program in %s/)", d.git.URL(demoRepo), demoBranch, commit[:12], demoProgramDir)

	if err := <-built; err != nil {
		return err
	}
	d.logf("  controller built in %s", since(buildStart))

	d.logf("Starting the controller")
	t0 = time.Now()
	if d.ctrl, err = testenv.StartController(ctx, testenv.ControllerConfig{
		Binary:     ctrlBin,
		BinDir:     d.bin,
		Kubeconfig: env.Kubeconfig,
		DataDir:    filepath.Join(d.tmp, "data"),
		LogPath:    filepath.Join(d.tmp, "controller.log"),
		Verbose:    d.verboseWriter(),
	}); err != nil {
		return err
	}
	d.defer_("stop the controller", d.ctrl.Stop)
	d.logf("  controller ready in %s (pid %d, metrics http://%s/metrics, log %s)", since(t0), d.ctrl.Pid(), d.ctrl.MetricsAddr, d.ctrl.LogPath)

	d.logf("Applying the sample (namespace %s, Secrets pulumi-passphrase and registry-credentials, Stack %s)", demoNamespace, demoStackName)
	if err := applyManifests(ctx, env.Client, demoManifestsFor(d.git.URL(demoRepo))); err != nil {
		return err
	}

	d.logf("Waiting for the Stack to become Ready (at most %s)", opts.timeout)
	t0 = time.Now()
	key := client.ObjectKey{Namespace: demoNamespace, Name: demoStackName}
	stack, err := d.waitReady(ctx, key, commit)
	if err != nil {
		return err
	}
	d.logf("  Ready in %s", since(t0))

	if err := d.report(ctx, stack); err != nil {
		return err
	}
	if err := verifyDemo(ctx, env.Client, stack, commit); err != nil {
		return fmt.Errorf("the sample Stack is Ready but its results are not as expected: %w", err)
	}
	d.logf("Checked: the Stack is Ready at %s, ConfigMap %s/cluster-metadata holds the cluster metadata, and the outputs are published (the secret one only to the Secret).", commit[:12], demoNamespace)

	if opts.once {
		return nil
	}
	d.hints()
	return d.watch(ctx, key)
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
			fmt.Fprintf(d.errOut, "stackpilot demo: %s: %v\n", c.what, err)
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
