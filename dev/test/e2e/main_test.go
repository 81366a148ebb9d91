// Package e2e holds end-to-end tests against a real kube-apiserver with the real
// Pulumi engine, YAML language host and Kubernetes provider built by `make tools`,
// and the controller running as its own process.
package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

var env *testenv.Env

// e2eParallel is how many e2e tests run at once unless -parallel says
// otherwise. They mostly wait (a sequential run keeps under a third of two
// cores busy): on two cores 17 of them took 106 s 2 at a time (go test's
// default there), 69 s 4 at a time, 67 s 8 at a time.
const e2eParallel = 4

func TestMain(m *testing.M) {
	testenv.MinParallel(e2eParallel)
	// The tests' client logs nothing worth reading (the API server's
	// deprecation warnings); without a logger controller-runtime prints a
	// goroutine dump saying so into the test output.
	ctrllog.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	code := testenv.Run(m, testenv.Options{Scheme: scheme, FluxCRDs: true}, &env)
	// The controller and CLI binaries the tests built (about 100 MB a run)
	// go with the run, or every run leaves its own in TMPDIR.
	for _, bin := range []string{controllerBin, cliBin} {
		if bin != "" {
			_ = os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}
