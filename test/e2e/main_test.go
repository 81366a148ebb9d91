// Package e2e holds end-to-end tests against a real kube-apiserver with the real
// Pulumi engine, YAML language host and Kubernetes provider built by `make tools`.
package e2e

import (
	"testing"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}
