// Package daemon runs the server processes of the control planes this project
// starts on the machine (etcd, kube-apiserver, kube-controller-manager, the
// kubelet...; see internal/controlplane and dev/internal/cluster): each started
// with its output in a log file, watched so that a wait gives up as soon as
// the process dies instead of at its timeout, and stopped by process group.
package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one started daemon.
type Process struct {
	// Name says which component it is, in errors.
	Name string
	// Log is the file its stdout and stderr go to.
	Log string
	Cmd *exec.Cmd

	done chan struct{}
}

// Start starts cmd in a process group of its own, killed when the calling
// process dies (even by SIGKILL, so no etcd outlives a killed test binary),
// with its output into log. Start owns log: it is closed when the process
// ends, or at once if it cannot start.
func Start(name string, cmd *exec.Cmd, log *os.File) (*Process, error) {
	return start(name, cmd, log, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL})
}

// StartDetached starts cmd as Start does, but in a session of its own that
// outlives the caller: for a cluster another process (`make cluster-down`)
// stops later.
func StartDetached(name string, cmd *exec.Cmd, log *os.File) (*Process, error) {
	return start(name, cmd, log, &syscall.SysProcAttr{Setsid: true})
}

func start(name string, cmd *exec.Cmd, log *os.File, attr *syscall.SysProcAttr) (*Process, error) {
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: log.Name(), Cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// ExitedError says that a daemon ended while it was needed, and where its
// log, which says why, is.
type ExitedError struct {
	Name, Log string
	State     *os.ProcessState
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("%s exited (%v); see %s", e.Name, e.State, e.Log)
}

// Exited returns an *ExitedError once the process has ended, nil while it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return &ExitedError{Name: p.Name, Log: p.Log, State: p.Cmd.ProcessState}
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, and SIGKILL after grace. It
// returns once the process has been reaped.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.Name, grace)
	}
}
