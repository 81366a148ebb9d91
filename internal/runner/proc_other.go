//go:build !linux

package runner

import (
	"syscall"
)

// KillProcessTree SIGKILLs root and, when root leads a process group, the group.
// Without /proc the plugins the pulumi CLI starts in groups of their own cannot
// be found; they stop when they notice the engine is gone.
func KillProcessTree(root int) {
	if pgid, err := syscall.Getpgid(root); err == nil && pgid == root {
		_ = syscall.Kill(-root, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(root, syscall.SIGKILL)
}

// ProcessAlive reports whether a process with this PID exists.
func ProcessAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// KillDescendants cannot find the caller's descendants without /proc.
func KillDescendants() {}

// BecomeSubreaper is Linux only; elsewhere orphans go to init.
func BecomeSubreaper() error { return nil }
