// Package e2e holds end-to-end tests against a real kube-apiserver with the real
// Pulumi engine, YAML language host and Kubernetes provider built by `make tools`,
// and the controller running as its own process.
package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	testenv.Main(m, testenv.Options{Scheme: scheme, FluxCRDs: true}, &env)
}
