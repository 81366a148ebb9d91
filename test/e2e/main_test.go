// Package e2e holds end-to-end tests against a real kube-apiserver with the real
// Pulumi engine, YAML language host and Kubernetes provider built by `make tools`,
// and the controller running as its own process.
package e2e

import (
	"flag"
	"fmt"
	goruntime "runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

var env *testenv.Env

// minParallel is how many e2e tests run at once unless -parallel says
// otherwise. They mostly wait (a sequential run keeps under a third of two
// cores busy), so GOMAXPROCS, go test's default, leaves the machine idle: on
// two cores 17 of them took 106 s with 2 at a time, 69 s with 4, 67 s with 8.
const minParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && goruntime.GOMAXPROCS(0) < minParallel {
		_ = flag.Set("test.parallel", fmt.Sprint(minParallel))
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	testenv.Main(m, testenv.Options{Scheme: scheme, FluxCRDs: true}, &env)
}
