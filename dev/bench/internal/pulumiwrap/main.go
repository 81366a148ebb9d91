// Command pulumiwrap stands in for the pulumi CLI so that the benchmarks can
// count and time the pulumi processes an operation starts, from outside the
// code that starts them.
//
// Installed as <dir>/bin/pulumi (the shape the runner and the Automation API
// want), it reads the real CLI's path from <dir>/real, runs it with the same
// arguments, standard streams and environment, passes SIGINT, SIGTERM, SIGHUP
// and SIGQUIT on to it, and when it ends appends one JSON line to
// <dir>/calls.log: start and end, argv[1..2], exit code, its own pid and
// parent pid, and the user and system CPU of the real CLI's whole process tree
// (wait4's rusage: the CLI and the plugins it waited for). It exits with the
// CLI's exit code (128+signal when the CLI was killed by a signal).
//
// It is a Go program, not a shell script, because `exec pulumi` in a script
// loses the end time, and a script that waits must forward signals by hand.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Call is one line of calls.log; benchenv.Call reads the same fields.
type Call struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Args    []string  `json:"args"`    // argv[1..2] (fewer when there are fewer)
	Command string    `json:"command"` // the subcommand: "up", "stack select" (no flag, no value)
	Exit    int       `json:"exit"`
	Pid     int       `json:"pid"`  // the wrapper's pid
	Ppid    int       `json:"ppid"` // who started the wrapper (the runner, the bench)
	UserCPU float64   `json:"userCPU"`
	SysCPU  float64   `json:"sysCPU"`
}

func main() { os.Exit(run()) }

func run() int {
	self, err := os.Executable()
	if err != nil {
		return fail("find own path: %v", err)
	}
	dir := filepath.Dir(filepath.Dir(self)) // <dir>/bin/pulumi
	data, err := os.ReadFile(filepath.Join(dir, "real"))
	if err != nil {
		return fail("read the real pulumi's path: %v", err)
	}
	real := strings.TrimSpace(string(data))

	// Signals are caught before the CLI starts, so that none is lost between.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)

	c := Call{Start: time.Now(), Args: argv12(os.Args), Command: command(os.Args[1:]), Pid: os.Getpid(), Ppid: os.Getppid()}
	cmd := exec.Command(real, os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fail("start %s: %v", real, err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	c.End = time.Now()

	st := cmd.ProcessState
	c.Exit = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		c.Exit = 128 + int(ws.Signal())
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		c.UserCPU = time.Duration(ru.Utime.Nano()).Seconds()
		c.SysCPU = time.Duration(ru.Stime.Nano()).Seconds()
	}
	if err := appendCall(filepath.Join(dir, "calls.log"), c); err != nil {
		fmt.Fprintf(os.Stderr, "pulumiwrap: %v\n", err)
	}
	return c.Exit
}

func argv12(args []string) []string {
	if len(args) > 3 {
		return args[1:3]
	}
	return args[1:]
}

// groups are the commands whose first argument is a subcommand.
var groups = map[string]bool{
	"stack": true, "config": true, "plugin": true, "state": true, "policy": true,
	"org": true, "env": true, "schema": true, "package": true, "deployment": true,
}

// command is the subcommand the CLI runs: the first word that is not a flag
// (the runner puts --non-interactive first), and the next one too when the
// first is a command group. Config values and other arguments are never
// taken: a value comes after its subcommand.
func command(args []string) string {
	var words []string
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			if len(words) > 0 {
				break
			}
			continue
		}
		words = append(words, a)
		if len(words) == 2 || !groups[words[0]] {
			break
		}
	}
	return strings.Join(words, " ")
}

// appendCall writes the line with one write on an O_APPEND file, so that
// wrappers ending at the same time do not interleave.
func appendCall(path string, c Call) error {
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "pulumiwrap: "+format+"\n", args...)
	return 127
}
