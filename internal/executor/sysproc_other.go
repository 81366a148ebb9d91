//go:build !linux

package executor

import "syscall"

// sysProcAttr puts the runner in a process group of its own. Without a parent
// death signal the runner notices a dead controller by polling its parent PID.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
