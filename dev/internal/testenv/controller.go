package testenv

import (
	"context"

	"github.com/stackpilot/stackpilot/dev/internal/controllerproc"
)

// ControllerConfig says how to run stackpilot-controller as a child process.
type ControllerConfig = controllerproc.Config

// ControllerProcess is stackpilot-controller running as a child process, as
// users run it: its own process and data dir, reaching the API server through a
// kubeconfig, so that tests can kill it like a crash would.
type ControllerProcess = controllerproc.Process

// BuildController builds ./cmd/controller of the repository at root into out.
func BuildController(ctx context.Context, root, out string) error {
	return controllerproc.Build(ctx, root, out)
}

// StartController starts the controller and waits until it answers /readyz.
func StartController(ctx context.Context, c ControllerConfig) (*ControllerProcess, error) {
	return controllerproc.Start(ctx, c)
}

// FreeAddr returns a 127.0.0.1 address with a port that was free just now.
func FreeAddr() (string, error) { return controllerproc.FreeAddr() }

// TailFile returns the last n lines of a file, for error messages.
func TailFile(path string, n int) string { return controllerproc.TailFile(path, n) }
