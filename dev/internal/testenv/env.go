package testenv

import (
	"fmt"
	"os"
	"testing"

	base "github.com/stackpilot/stackpilot/internal/testenv"
)

// Env is the product's control plane (internal/testenv.Env, whose fields and
// methods it promotes) with the methods that start Flux's controllers
// against it, which only the dev module's tests use.
type Env struct {
	*base.Env
}

// Start is internal/testenv.Start returning the dev module's Env.
func Start(opts Options) (*Env, error) {
	e, err := base.Start(opts)
	if err != nil {
		return nil, err
	}
	return &Env{Env: e}, nil
}

// Main runs a package's tests against one control plane shared by all of them:
// call it from TestMain. It exits the process. It is internal/testenv.Main for
// the dev module's Env.
func Main(m *testing.M, opts Options, env **Env) {
	os.Exit(Run(m, opts, env))
}

// Run is Main for a TestMain with more to undo once the tests have run (and
// the control plane is gone): it returns the exit code instead of exiting.
func Run(m *testing.M, opts Options, env **Env) int {
	started, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*env = started
	code := m.Run()
	if err := started.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	return code
}
