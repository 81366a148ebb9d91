// Package testenv is what the product's white-box tests run against: a real
// Kubernetes control plane (internal/controlplane: etcd, kube-apiserver and
// kube-controller-manager from the pinned binaries in bin/), a real Git
// server (internal/gitserver, and Flux's gittestserver for SSH), an OCI
// registry and Flux artifacts, each wrapped for a testing.TB. What only the
// end-to-end tests, the demo and the benchmarks need (the controller, Flux's
// controllers and the one-node cluster as processes, S3, image pushers) is in
// the dev module's dev/internal/testenv, which re-exports this package. The
// stackpilot CLI must not link either (cmd/stackpilot/deps_test.go).
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/controlplane"
)

// Options choose what the control plane gets besides the core API.
type Options struct {
	// Scheme for the client; client-go's scheme when nil.
	Scheme *runtime.Scheme
	// CRDDirs are installed at start; config/crd/bases of this repository is always included.
	CRDDirs []string
	// FluxCRDs installs the Flux source CRDs that `make tools` copied into bin/crds/flux.
	FluxCRDs bool
	// Dir keeps the control plane's data (etcd's among it) there instead
	// of in a temporary directory that Stop removes: a control plane started
	// on the same Dir later has the same objects.
	Dir string
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
	// ControlPlane is what runs; its Dir holds the components' logs.
	ControlPlane *controlplane.ControlPlane
}

// Start brings up etcd, kube-apiserver and kube-controller-manager, installs
// the CRDs and waits until the garbage collector works.
func Start(opts Options) (*Env, error) {
	root, bin, err := Paths()
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
	cp, err := controlplane.Start(context.Background(), controlplane.Options{BinDir: bin, CRDDirs: crdDirs, Dir: opts.Dir})
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	e := &Env{Config: cp.Config, Kubeconfig: cp.Kubeconfig, BinDir: bin, Root: root, ControlPlane: cp}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("testenv: client: %w", err)
	}
	return e, nil
}

// Stop ends every process and removes the temporary files.
func (e *Env) Stop() error {
	return e.ControlPlane.Stop()
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
