// Package benchenv runs the pieces the benchmarks in dev/bench/ measure, outside
// `go test`, the way `stackpilot-demo` does: the real control plane from
// internal/testenv (etcd, kube-apiserver, kube-controller-manager from bin/),
// testenv's Git server over smart HTTP that counts its requests, and the
// controller built from ./cmd/controller running as its own process
// (testenv.StartController).
package benchenv

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// Tools are the pinned binaries from bin/ the benchmarks run.
var Tools = []string{
	"etcd", "kube-apiserver", "kube-controller-manager",
	"pulumi", "pulumi-language-yaml", "pulumi-resource-kubernetes",
}

// Env is one benchmark's world. Close undoes all of it.
type Env struct {
	// Root is the repository, Bin its bin/ (the pinned tools), Tmp a fresh
	// directory for this run.
	Root, Bin, Tmp string
	// Kube is the control plane; Client talks to it directly (no cache).
	Kube   *testenv.Env
	Client client.Client
	// Git serves repositories over HTTP and counts requests; Commit and
	// GitCounts use it.
	Git *testenv.GitServer
	// ControllerBin is ./cmd/controller, built for this run.
	ControllerBin string
	// Out gets progress lines; Verbose copies the controller's log to stderr.
	Out     io.Writer
	Verbose bool
	// Keep leaves Tmp in place (logs, state) for a look afterwards.
	Keep bool
	// Poll is how often WaitAllApplied lists the Stacks (default 2s): the
	// resolution of its times, and a cost on the API server and the benchmark.
	Poll time.Duration

	start    time.Time
	cleanups []func()
	prog     *testenv.Program // the TB of the Git server
}

// Scheme knows the core types and Stack.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Start prints the header (what is measured, the machine, what else runs),
// builds the controller and starts the control plane and the Git server.
// The control plane's data and the repositories live in Tmp, so that a run
// with Keep leaves all of it for Resume.
func Start(ctx context.Context, name, what string, out io.Writer) (*Env, error) {
	return start(ctx, name, "", "", what, out)
}

// Resume is Start on the Tmp of an earlier run that kept it (Keep): the
// control plane comes back with the objects it had, and the Git server with
// its repositories at gitAddr, the address the Stacks were given. The
// directory stays (Keep is set).
func Resume(ctx context.Context, name, dir, gitAddr, what string, out io.Writer) (*Env, error) {
	if _, err := os.Stat(filepath.Join(dir, "controlplane", "etcd")); err != nil {
		return nil, fmt.Errorf("resume %s: no kept control plane in it (%w): resume a directory a run with -keep printed", dir, err)
	}
	return start(ctx, name, dir, gitAddr, what, out)
}

func start(ctx context.Context, name, dir, gitAddr, what string, out io.Writer) (_ *Env, err error) {
	e := &Env{Out: out, start: time.Now(), Tmp: dir, Keep: dir != ""}
	e.Header(what)
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.Root, err = testenv.ModuleRoot(); err != nil {
		return nil, fmt.Errorf("%w (run the benchmarks from the Stackpilot repository: `make bench`)", err)
	}
	if e.Bin, err = testenv.BinDir(); err != nil {
		return nil, err
	}
	if err := testenv.RequireBinaries(e.Bin, Tools...); err != nil {
		return nil, err
	}
	if e.Tmp == "" {
		if e.Tmp, err = os.MkdirTemp("", "stackpilot-bench-"+name+"-"); err != nil {
			return nil, err
		}
	}
	e.defer_(func() {
		if e.Keep {
			e.Logf("kept %s", e.Tmp)
			return
		}
		_ = os.RemoveAll(e.Tmp)
	})

	e.ControllerBin = filepath.Join(e.Tmp, "bin", "stackpilot-controller")
	built := make(chan error, 1)
	go func() { built <- testenv.BuildController(ctx, e.Root, e.ControllerBin) }()

	e.Logf("starting the control plane (etcd, kube-apiserver, kube-controller-manager from %s)", e.Bin)
	t0 := time.Now()
	kube, err := testenv.Start(testenv.Options{Scheme: Scheme(), Dir: filepath.Join(e.Tmp, "controlplane")})
	if err != nil {
		<-built
		return nil, err
	}
	e.Kube, e.Client = kube, kube.Client
	e.defer_(func() { _ = kube.Stop() })
	e.Logf("  control plane ready in %s", Since(t0))

	if err := e.startGitServer(gitAddr); err != nil {
		<-built
		return nil, err
	}

	if err := <-built; err != nil {
		return nil, err
	}
	e.Logf("  controller built: %s", e.ControllerBin)
	return e, ctx.Err()
}

func (e *Env) defer_(fn func()) { e.cleanups = append(e.cleanups, fn) }

// Close stops everything Start and StartController started, newest first.
func (e *Env) Close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

// Logf prints a progress line stamped with the time since Start.
func (e *Env) Logf(format string, args ...any) {
	fmt.Fprintf(e.Out, "[%7.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// PulumiEnv is the environment of the Pulumi processes the benchmarks start
// themselves, the same as testenv.StartController gives the controller (which
// passes it on to its runners): testenv.PulumiEnv (bin/ first on PATH, no
// update check, no plugin downloads) and the control plane's kubeconfig for
// the Kubernetes provider.
func (e *Env) PulumiEnv() []string {
	env := append(os.Environ(), "KUBECONFIG="+e.Kube.Kubeconfig)
	for k, v := range testenv.PulumiEnv(e.Bin) {
		env = append(env, k+"="+v)
	}
	return env
}

// Since is the time since t, rounded for printing.
func Since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// OwnFlags gives the benchmark a command line of its own. glog (which
// Pulumi's SDK imports, and the runner imports that) registers -v on the
// global flag set when the program starts, so a benchmark that defines its
// own -v there panics before it runs. Call it first in main.
func OwnFlags() {
	flag.CommandLine = flag.NewFlagSet(os.Args[0], flag.ExitOnError)
}
