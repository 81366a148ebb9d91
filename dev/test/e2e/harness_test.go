package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

var (
	buildOnce     sync.Once
	controllerBin string
	buildErr      error
)

// controllerBinary builds cmd/controller once per test run: the e2e tests run the
// controller as users do, as its own process, so that it can be killed.
func controllerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stackpilot-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		controllerBin = filepath.Join(dir, "stackpilot-controller")
		buildErr = testenv.BuildController(context.Background(), env.Root, controllerBin)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return controllerBin
}

// controllerProcess is a running stackpilot-controller limited to one namespace.
type controllerProcess struct {
	*testenv.ControllerProcess
}

// startController runs the controller for namespace ns with data in dataDir.
func startController(t testing.TB, ns, dataDir string, extraArgs ...string) *controllerProcess {
	t.Helper()
	p, err := testenv.StartController(context.Background(), testenv.ControllerConfig{
		Binary:     controllerBinary(t),
		BinDir:     env.BinDir,
		Kubeconfig: env.Kubeconfig,
		DataDir:    dataDir,
		Args:       append([]string{"--watch-namespace=" + ns}, extraArgs...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return &controllerProcess{p}
}

// Logs returns everything the controller wrote so far.
func (c *controllerProcess) Logs(t testing.TB) string {
	logs, err := c.ControllerProcess.Logs()
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// Operations counts the runner processes started (stackpilot_operations_total)
// for one operation type, or all types when typ is "".
func (c *controllerProcess) Operations(t testing.TB, typ string) int {
	t.Helper()
	var labels []string
	if typ != "" {
		labels = append(labels, `type="`+typ+`"`)
	}
	n, err := c.Metric("stackpilot_operations_total", labels...)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// The e2e tests run in parallel (each calls t.Parallel first): they spend most
// of their time waiting on Pulumi, the controller and intervals. They share
// nothing one of them counts or changes: each has its own namespace, Git
// server or registry, data dir and controller process, which watches that
// namespace alone; operation counts are that process's metrics, and the
// processes a test inspects are that controller's descendants or work in its
// data dir. Only the control plane is shared; Flux's controllers, which would
// otherwise watch every namespace, are started for the test's namespace alone
// (testenv's Start*ControllerIn).
