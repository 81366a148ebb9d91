package runner

import (
	"os"
	"testing"

	"github.com/stackpilot/stackpilot/internal/policy/analyzer"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// The tests that run Pulumi are parallel (t.Parallel): each has its own
// backend, PULUMI_HOME, work dirs and namespace, and most of their time is
// spent waiting (a 40s operation timeout, Pulumi's startup), so 4 run at once
// (testenv.MinParallel). One that sets a package variable is not parallel,
// and runs before them.

// TestMain lets the test binary play helper processes (see helperMain) and
// stops the shared control plane if a test started one.
func TestMain(m *testing.M) {
	// The test binary is the runner's binary, so the policy analyzer too.
	if analyzer.Invoked() {
		os.Exit(analyzer.Main())
	}
	if role := os.Getenv(helperRoleEnv); role != "" {
		os.Exit(helperMain(role))
	}
	testenv.MinParallel(4)
	code := m.Run()
	kube.Stop()
	os.Exit(code)
}

// kube is one control plane shared by the tests that need the Kubernetes
// provider, started by the first of them: the other tests need no API server.
var kube testenv.Lazy

func kubeEnv(t *testing.T) *testenv.Env { return kube.Get(t) }
