package executor

import (
	"syscall"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// sysProcAttr puts the runner in a process group of its own, so that it and the
// pulumi CLI can be killed together without touching the controller, and asks
// the kernel to signal it when the controller dies.
//
// Why runner.ParentDeathSignal and not SIGKILL: a SIGKILLed runner could not
// take its children with it, and the pulumi CLI and its plugins would go on
// alone. On that signal the runner checks that its parent is gone and kills its
// whole process tree itself.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: runner.ParentDeathSignal}
}
