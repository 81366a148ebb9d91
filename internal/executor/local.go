// Package executor runs operations: it hands a runner.Spec to a runner process
// and brings back its runner.Result.
package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// DefaultKillGrace is how long past Spec.Timeout the runner may take to end on
// its own. At its own timeout the runner sends the pulumi CLI SIGINT and waits
// for it to finish the steps in flight and release the stack lock; the rest is
// for writing the result. After it the runner is asked to stop (CancelGrace).
const DefaultKillGrace = 30 * time.Second

// DefaultCancelGrace is how long a runner asked to stop may take to cancel
// Pulumi and write its result before its process tree is killed.
const DefaultCancelGrace = 30 * time.Second

// Local runs each operation as a child process of the controller (the runner),
// at most Concurrency at a time. Use it through a pointer; do not copy it.
//
// Files: each operation gets <WorkRoot>/<Spec.ID>/ holding spec.json (0600: it
// carries secrets), result.json and runner.log, removed when the operation ends
// (kept for a failed operation when KeepFailed is set).
//
// Program: when Spec.WorkDir is set, the caller has placed the program there and
// keeps ownership of it. When it is empty, the executor creates
// <WorkRoot>/<Spec.ID>/work, calls PrepareWorkDir to fill it (for example by
// unpacking the cached artifact), and removes it with the rest.
type Local struct {
	// Command starts the runner; "--spec <file> --result <file>" are appended.
	// For example [/path/stackpilot-controller, "runner"].
	Command []string
	// WorkRoot holds one directory per operation.
	WorkRoot string
	// PulumiHome is shared by all operations so plugins are installed once; it
	// fills Spec.PulumiHome when that is empty.
	PulumiHome string
	// Concurrency bounds the runners alive at once; less than 1 means 1.
	Concurrency int
	// Env is the runner's base environment (PATH, HOME, proxies...). Nil means
	// PATH, HOME and TMPDIR of the controller only: the controller's own
	// credentials must not leak into user programs. Spec.Env travels in the spec
	// file, not in the runner's environment.
	Env []string
	// PrepareWorkDir fills a fresh program directory for specs without WorkDir.
	PrepareWorkDir func(ctx context.Context, dir string, spec runner.Spec) error
	// KillGrace is added to Spec.Timeout before the runner is asked to stop;
	// zero means DefaultKillGrace.
	KillGrace time.Duration
	// CancelGrace is how long a runner asked to stop (the caller's context
	// ended, or it ran past Spec.Timeout+KillGrace) may take to cancel Pulumi
	// gracefully and write its result, before its whole process tree is
	// killed; zero means DefaultCancelGrace. The controller sets it to
	// --graceful-shutdown-timeout.
	CancelGrace time.Duration
	// KeepFailed keeps the directory of a failed operation for debugging. It
	// holds the spec, secrets included.
	KeepFailed bool

	initOnce sync.Once
	slots    chan struct{}
	started  atomic.Int64
	running  atomic.Int32
}

// Started counts the runner processes started since the executor was created.
func (l *Local) Started() int64 { return l.started.Load() }

// Running is the number of runner processes alive now.
func (l *Local) Running() int { return int(l.running.Load()) }

// Reasons a runner ended without a result.
const (
	ReasonExited    = "exited"    // it ended on its own (crashed, or could not write)
	ReasonTimeout   = "timeout"   // asked to stop at Spec.Timeout + KillGrace, then killed
	ReasonCancelled = "cancelled" // asked to stop because the caller's context ended, then killed
)

// ErrTimeout is the cause of a RunnerError with ReasonTimeout.
var ErrTimeout = errors.New("operation timed out")

// RunnerError says a runner process ended without a usable result.
type RunnerError struct {
	ID       string
	Reason   string
	ExitCode int    // -1 when it was killed by a signal
	Stderr   string // the end of its stderr, with the spec's secret values redacted
	Err      error  // ErrTimeout, the context's error, or why the result could not be read
}

func (e *RunnerError) Error() string {
	var b strings.Builder
	switch e.Reason {
	case ReasonTimeout:
		fmt.Fprintf(&b, "runner of operation %s ran past its timeout and did not stop in time", e.ID)
	case ReasonCancelled:
		fmt.Fprintf(&b, "runner of operation %s cancelled (%v) and did not stop in time", e.ID, e.Err)
	default:
		fmt.Fprintf(&b, "runner of operation %s exited with code %d: %v", e.ID, e.ExitCode, e.Err)
	}
	if e.Stderr != "" {
		b.WriteString("; stderr: ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

func (e *RunnerError) Unwrap() error { return e.Err }

func (l *Local) init() {
	l.initOnce.Do(func() {
		l.slots = make(chan struct{}, max(l.Concurrency, 1))
	})
}

// Run runs one operation in a runner process and returns its result. An error
// means there is no result: the operation never started, or its runner died
// (*RunnerError). Waiting for a free slot ends with ctx.
func (l *Local) Run(ctx context.Context, spec runner.Spec) (runner.Result, error) {
	if err := l.check(spec); err != nil {
		return runner.Result{}, err
	}
	l.init()
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return runner.Result{}, fmt.Errorf("operation %s: waiting for a free runner slot: %w", spec.ID, ctx.Err())
	}
	defer func() { <-l.slots }()
	if err := ctx.Err(); err != nil {
		// Both cases of the select may be ready: a stopping caller starts nothing.
		return runner.Result{}, fmt.Errorf("operation %s not started: %w", spec.ID, err)
	}
	return l.run(ctx, spec)
}

func (l *Local) check(spec runner.Spec) error {
	switch {
	case len(l.Command) == 0:
		return errors.New("executor: Local.Command is empty")
	case l.WorkRoot == "":
		return errors.New("executor: Local.WorkRoot is empty")
	case spec.ID == "" || spec.ID == "." || spec.ID == ".." || strings.ContainsAny(spec.ID, `/\`):
		// The ID names a directory under WorkRoot; it must not point elsewhere.
		return fmt.Errorf("executor: operation ID %q cannot name a directory", spec.ID)
	case spec.WorkDir == "" && l.PrepareWorkDir == nil:
		return fmt.Errorf("executor: operation %s has no WorkDir and Local.PrepareWorkDir is nil", spec.ID)
	}
	return nil
}

func (l *Local) run(ctx context.Context, spec runner.Spec) (res runner.Result, err error) {
	if err := os.MkdirAll(l.WorkRoot, 0o700); err != nil {
		return res, err
	}
	dir := filepath.Join(l.WorkRoot, spec.ID)
	// Mkdir, not MkdirAll: an existing directory means another operation with the
	// same ID, whose files must not be mixed with these.
	if err := os.Mkdir(dir, 0o700); err != nil {
		return res, fmt.Errorf("executor: operation directory: %w", err)
	}
	defer func() {
		if l.KeepFailed && (err != nil || res.Outcome != runner.OutcomeSucceeded) {
			return
		}
		_ = os.RemoveAll(dir)
	}()

	if spec.APIVersion == "" {
		spec.APIVersion = runner.APIVersion
	}
	if spec.PulumiHome == "" {
		spec.PulumiHome = l.PulumiHome
	}
	if spec.WorkDir == "" {
		spec.WorkDir = filepath.Join(dir, "work")
		if err := os.Mkdir(spec.WorkDir, 0o700); err != nil {
			return res, err
		}
		if err := l.PrepareWorkDir(ctx, spec.WorkDir, spec); err != nil {
			return res, fmt.Errorf("executor: preparing the program of operation %s: %w", spec.ID, err)
		}
	}
	specPath := filepath.Join(dir, "spec.json")
	if err := runner.WriteSpec(specPath, spec); err != nil {
		return res, err
	}
	return l.runProcess(ctx, spec, dir, specPath, filepath.Join(dir, "result.json"))
}

// runProcess starts the runner in its own process group and waits for it. On
// cancel or timeout it first asks the runner to stop (stop), and kills its
// whole process tree only if it does not.
func (l *Local) runProcess(ctx context.Context, spec runner.Spec, dir, specPath, resultPath string) (runner.Result, error) {
	logPath := filepath.Join(dir, "runner.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return runner.Result{}, err
	}
	defer logFile.Close()

	args := append(append([]string{}, l.Command[1:]...), "--spec", specPath, "--result", resultPath)
	cmd := exec.Command(l.Command[0], args...)
	cmd.Dir = dir
	cmd.Env = l.env()
	// A file, not a pipe: a stray grandchild holding a pipe open would block Wait.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return runner.Result{}, fmt.Errorf("executor: starting the runner of operation %s: %w", spec.ID, err)
	}
	l.started.Add(1)
	l.running.Add(1)
	defer l.running.Add(-1)
	pid := cmd.Process.Pid

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var deadline <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(time.Duration(spec.Timeout) + l.killGrace())
		defer t.Stop()
		deadline = t.C
	}
	reason, cause := ReasonExited, error(nil)
	select {
	case <-waited:
	case <-ctx.Done():
		reason, cause = ReasonCancelled, ctx.Err()
		l.stop(pid, waited)
	case <-deadline:
		reason, cause = ReasonTimeout, ErrTimeout
		l.stop(pid, waited)
	}
	// Whatever the runner left in its group dies with it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)

	res, readErr := runner.ReadResult(resultPath)
	if readErr == nil && res.ID != spec.ID {
		readErr = fmt.Errorf("result is for operation %q", res.ID)
	}
	if readErr == nil {
		return res, nil // written before the runner ended, even if it was killed after
	}
	if cause == nil {
		cause = readErr
	}
	return runner.Result{}, &RunnerError{
		ID:       spec.ID,
		Reason:   reason,
		ExitCode: cmd.ProcessState.ExitCode(),
		Stderr:   runner.Redact(spec, tail(logPath, 4<<10)),
		Err:      cause,
	}
}

// stop asks the runner to cancel its operation, and kills its process tree if it
// has not ended after CancelGrace.
//
// Why SIGTERM to the runner alone, not its group: the runner cancels the pulumi
// CLI process it started by sending it one SIGINT and waiting for it to finish
// the steps in flight, write its checkpoint and release the stack lock.
// A signal to the whole group would reach the CLI as well, and a second SIGINT
// makes it stop at once, leaving the lock and pending operations behind. SIGKILL
// at once (what this did before) leaves them too, and orphans the plugins.
//
// Why the whole tree at the end: the CLI starts each plugin in a process group
// of its own, which a kill of the runner's group would miss.
func (l *Local) stop(pid int, waited <-chan error) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	t := time.NewTimer(l.cancelGrace())
	defer t.Stop()
	select {
	case <-waited:
		return
	case <-t.C:
	}
	runner.KillProcessTree(pid)
	<-waited
}

func (l *Local) cancelGrace() time.Duration {
	if l.CancelGrace > 0 {
		return l.CancelGrace
	}
	return DefaultCancelGrace
}

func (l *Local) killGrace() time.Duration {
	if l.KillGrace > 0 {
		return l.KillGrace
	}
	return DefaultKillGrace
}

func (l *Local) env() []string {
	if l.Env != nil {
		return l.Env
	}
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// tail returns the last n bytes of a file, starting at a line boundary.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	s := string(buf)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimSpace(s)
}
