// Package testenv starts a real Kubernetes control plane for tests: etcd and
// kube-apiserver through envtest, plus kube-controller-manager running the garbage
// collector and namespace controllers, all from the pinned binaries in bin/.
//
// Why the controller manager: Pulumi's Kubernetes provider deletes with foreground
// propagation, and only the garbage collector removes the foregroundDeletion
// finalizer; without it a replace or destroy hangs until its timeout.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options choose what the control plane gets besides the core API.
type Options struct {
	// Scheme for the client; client-go's scheme when nil.
	Scheme *runtime.Scheme
	// CRDDirs are installed at start; config/crd/bases of this repository is always included.
	CRDDirs []string
	// FluxCRDs installs the Flux source CRDs that `make tools` copied into bin/crds/flux.
	FluxCRDs bool
}

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) connection.
	Config *rest.Config
	// Client uses Config and the scheme of Options.
	Client client.Client
	// Kubeconfig is a kubeconfig file with the same admin identity, for child
	// processes such as the Pulumi Kubernetes provider.
	Kubeconfig string
	// BinDir holds the pinned tools.
	BinDir string
	// Root is the repository root.
	Root string

	env     *envtest.Environment
	dir     string
	kcm     *exec.Cmd
	kcmDone chan struct{}
}

// Start brings up etcd, kube-apiserver and kube-controller-manager and waits until
// the garbage collector works.
func Start(opts Options) (*Env, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if err := RequireBinaries(bin, "etcd", "kube-apiserver", "kube-controller-manager"); err != nil {
		return nil, err
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	crdDirs := append([]string{filepath.Join(root, "config", "crd", "bases")}, opts.CRDDirs...)
	if opts.FluxCRDs {
		crdDirs = append(crdDirs, filepath.Join(bin, "crds", "flux"))
	}
	dir, err := os.MkdirTemp("", "stackpilot-testenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{BinDir: bin, Root: root, dir: dir}
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     crdDirs,
		Scheme:                scheme,
	}
	if e.Config, err = e.env.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("testenv: start kube-apiserver and etcd: %w", err)
	}
	if err := e.setUp(scheme); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) setUp(scheme *runtime.Scheme) error {
	var err error
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("testenv: client: %w", err)
	}
	admin, err := e.env.AddUser(envtest.User{Name: "stackpilot-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("testenv: admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("testenv: admin kubeconfig: %w", err)
	}
	e.Kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	if err := e.startControllerManager(); err != nil {
		return err
	}
	return e.waitForGarbageCollector(90 * time.Second)
}

// startControllerManager runs only the controllers tests depend on. It serves no
// HTTPS (--secure-port=0) so nothing listens beyond the API server.
func (e *Env) startControllerManager() error {
	logFile, err := os.Create(filepath.Join(e.dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(e.BinDir, "kube-controller-manager"),
		"--kubeconfig="+e.Kubeconfig,
		"--controllers=garbage-collector-controller,namespace-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--v=1",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Die with the test process even when it is killed without cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("testenv: start kube-controller-manager: %w", err)
	}
	e.kcm = cmd
	e.kcmDone = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(e.kcmDone)
	}()
	return nil
}

// waitForGarbageCollector proves the garbage collector runs: a ConfigMap deleted
// with foreground propagation disappears only once the collector has removed its
// foregroundDeletion finalizer.
func (e *Env) waitForGarbageCollector(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "testenv-gc-probe", Namespace: "default"}}
	if err := e.Client.Create(ctx, probe); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testenv: gc probe: %w", err)
	}
	if err := e.Client.Delete(ctx, probe, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		return fmt.Errorf("testenv: gc probe delete: %w", err)
	}
	for {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(probe), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-e.kcmDone:
			return fmt.Errorf("testenv: kube-controller-manager exited; see %s", filepath.Join(e.dir, "kube-controller-manager.log"))
		case <-ctx.Done():
			return fmt.Errorf("testenv: the garbage collector did not finish a foreground delete within %s; see %s",
				timeout, filepath.Join(e.dir, "kube-controller-manager.log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends every process and removes the temporary files.
func (e *Env) Stop() error {
	if e.kcm != nil && e.kcm.Process != nil {
		_ = syscall.Kill(-e.kcm.Process.Pid, syscall.SIGTERM)
		select {
		case <-e.kcmDone:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-e.kcm.Process.Pid, syscall.SIGKILL)
			<-e.kcmDone
		}
	}
	err := e.env.Stop()
	_ = os.RemoveAll(e.dir)
	return err
}

// Namespace creates a fresh namespace for one test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-" + hex.EncodeToString(b)}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// Main runs a package's tests against one control plane shared by all of them:
// call it from TestMain. It exits the process.
func Main(m *testing.M, opts Options, env **Env) {
	started, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env = started
	code := m.Run()
	if err := started.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	os.Exit(code)
}
