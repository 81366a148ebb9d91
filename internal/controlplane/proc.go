package controlplane

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one component of the control plane, its output in <dir>/<name>.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startProc starts argv in its own process group, killed when this process
// dies (even by SIGKILL, so no etcd outlives a killed test binary).
func startProc(dir, name string, argv ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("controlplane: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited says whether the process has ended, and with what.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("controlplane: %s exited (%v); see %s", p.name, p.cmd.ProcessState, p.log)
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("controlplane: %s did not stop within %s of SIGTERM; killed", p.name, grace)
	}
}

// freePort returns a port of 127.0.0.1 that was free just now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
