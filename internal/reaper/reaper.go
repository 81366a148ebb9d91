// Package reaper lets a binary be PID 1 of its container, as the controller is
// in its image: PID 1 must reap the orphans the kernel hands it (a plugin whose
// pulumi CLI died), or they stay zombies for the life of the Pod, and the
// kernel gives PID 1 no default signal handling.
//
// The pattern is tini's: as PID 1 the binary re-executes itself as its only
// child, forwards the signals it gets to that child, reaps every process that
// ends, and exits with the child's status. Reaping is done in that small parent
// and never in the process doing the work: a wait for any child there would
// steal the exit statuses exec.Cmd.Wait is waiting for.
package reaper

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// forwarded are the signals passed on to the child. SIGCHLD is not among them:
// it only wakes the reaping loop.
var forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// RunAsInit does nothing and returns false unless the calling process is PID 1.
// As PID 1 it runs the binary again, with the same arguments and environment,
// as its child, reaps until that child ends, and returns the exit code to end
// with (128+n when the child was killed by signal n) and true. Call it first in
// main: `if code, ok := reaper.RunAsInit(); ok { os.Exit(code) }`.
func RunAsInit() (int, bool) {
	if os.Getpid() != 1 {
		return 0, false
	}
	code, err := runInit()
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 1, true
	}
	return code, true
}

func runInit() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("find own executable: %w", err)
	}
	// Signals are caught before the child exists, so none is lost between its
	// start and the forwarding loop.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	child, err := os.StartProcess(self, os.Args, &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		// The child dies with its init, as the kernel does to every process of
		// the PID namespace when PID 1 exits.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 0, fmt.Errorf("start the child: %w", err)
	}
	go func() {
		for s := range sigs {
			_ = child.Signal(s)
		}
	}()
	return reap(child.Pid), nil
}

// reap waits for every child of this process, adopted orphans included, until
// main ends, and returns main's exit code.
func reap(main int) int {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 1 // ECHILD: main is gone without us seeing it; cannot happen
		}
		if pid != main {
			continue // an orphan, reaped
		}
		// Zombies already there are reaped before exit; anything still running
		// is killed by the kernel when PID 1 exits.
		for {
			if p, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); p <= 0 {
				break
			}
		}
		return exitCode(ws)
	}
}

func exitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}
