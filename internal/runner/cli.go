package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// InterruptGrace bounds how long the pulumi CLI may take to stop after it got
// SIGINT, before it is killed. The executor normally ends a runner that is slow
// to cancel sooner (its cancel grace); this bound is for a runner used alone.
const InterruptGrace = 5 * time.Minute

// pulumiCLI starts the pulumi CLI, one process per call, and counts them: the
// runner's whole cost model is "one process per operation", so every start
// goes through here.
//
// Why not the Automation API: it starts `pulumi version`, `stack select`,
// `config set-all`, then after the engine run `stack output` twice and `stack
// history`, each a ~0.2 s CLI start (dev/bench/processes). The runner knows the
// stack's name, backend and config, so it passes `--stack` on each call, writes
// the stack file itself, and takes counts and outputs from the event log and the
// state instead.
//
// Stopping: when the operation's context ends, the CLI gets SIGINT and then as
// long as it needs (up to grace) to finish the steps in flight, write its
// checkpoint and release the stack lock.
type pulumiCLI struct {
	path    string   // the binary
	workDir string   // the project directory
	env     []string // the whole environment of every call
	grace   time.Duration

	started atomic.Int32 // processes started so far
}

// newPulumiCLI finds the binary and builds the environment of every call.
func newPulumiCLI(spec Spec) (*pulumiCLI, error) {
	path := spec.PulumiCommand
	if path == "" {
		found, err := exec.LookPath("pulumi")
		if err != nil {
			return nil, &SpecError{Reason: "no pulumiCommand given and no pulumi on PATH"}
		}
		path = found
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, &SpecError{Reason: fmt.Sprintf("pulumiCommand %q: %v", path, err)}
	}
	env := os.Environ()
	for k, v := range workspaceEnv(spec) {
		env = append(env, k+"="+v)
	}
	// Plugins installed beside the CLI are found first, as with the SDK.
	env = prependPath(env, filepath.Dir(abs))
	return &pulumiCLI{path: abs, workDir: spec.WorkDir, env: env, grace: InterruptGrace}, nil
}

// CLIError is a pulumi call that did not exit 0. Its text carries the CLI's
// stdout and stderr, which is where Pulumi's own explanation is.
type CLIError struct {
	Command string // "up", "stack init", ...
	Code    int    // exit code; -2 when the CLI did not run to one
	Stdout  string
	Stderr  string
	Err     error
}

func (e *CLIError) Error() string {
	return fmt.Sprintf("pulumi %s: %v\ncode: %d\nstdout: %s\nstderr: %s\n", e.Command, e.Err, e.Code, e.Stdout, e.Stderr)
}

func (e *CLIError) Unwrap() error { return e.Err }

var (
	stackNotFoundPattern  = regexp.MustCompile(`no stack named .* found`)
	stackExistsPattern    = regexp.MustCompile(`stack '.*' already exists|already exists`)
	concurrentUpdateTexts = []string{"[409] Conflict: Another update is currently in progress.", "the stack is currently locked by"}
)

// isStackNotFound says that a call failed because the stack does not exist.
func isStackNotFound(err error) bool {
	ce, ok := errors.AsType[*CLIError](err)
	return ok && stackNotFoundPattern.MatchString(ce.Stderr)
}

func isStackExists(err error) bool {
	ce, ok := errors.AsType[*CLIError](err)
	return ok && stackExistsPattern.MatchString(ce.Stderr)
}

// isConcurrentUpdate says that another update holds the stack's lock.
func isConcurrentUpdate(err error) bool {
	ce, ok := errors.AsType[*CLIError](err)
	if !ok {
		return false
	}
	for _, t := range concurrentUpdateTexts {
		if strings.Contains(ce.Stderr, t) {
			return true
		}
	}
	return false
}

// run starts one pulumi process with args (and --non-interactive) and waits for
// it. stderr, when not nil, also gets what the CLI writes to its stderr.
func (c *pulumiCLI) run(ctx context.Context, stdin io.Reader, stderr io.Writer, args ...string) (string, error) {
	return c.runTo(ctx, stdin, nil, stderr, args...)
}

// runTo is run with stdout, when not nil, also getting what the CLI prints.
func (c *pulumiCLI) runTo(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) (string, error) {
	c.started.Add(1)
	cmd := exec.CommandContext(ctx, c.path, nonInteractive(args)...)
	cmd.Dir = c.workDir
	cmd.Env = c.env
	var out, errOut strings.Builder
	cmd.Stdout = &out
	if stdout != nil {
		cmd.Stdout = io.MultiWriter(&out, stdout)
	}
	cmd.Stderr = &errOut
	if stderr != nil {
		cmd.Stderr = io.MultiWriter(&errOut, stderr)
	}
	cmd.Stdin = stdin
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = c.grace
	err := cmd.Run()
	if err == nil {
		return out.String(), nil
	}
	code := -2
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exit.ExitCode()
	}
	return out.String(), &CLIError{Command: commandName(args), Code: code, Stdout: out.String(), Stderr: errOut.String(), Err: err}
}

// commandName is the CLI command of args, for messages: "up", "stack init".
func commandName(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 2 {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// nonInteractive makes the CLI fail instead of prompting. Flags after "--" are
// the program's, not the CLI's.
func nonInteractive(args []string) []string {
	flags := args
	if i := slices.Index(args, "--"); i >= 0 {
		flags = args[:i]
	}
	if slices.Contains(flags, "--non-interactive") {
		return args
	}
	return append([]string{"--non-interactive"}, args...)
}

func prependPath(env []string, dir string) []string {
	env = slices.Clone(env)
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			if v != "" {
				dir += string(os.PathListSeparator) + v
			}
			env[i] = "PATH=" + dir
			return env
		}
	}
	return append(env, "PATH="+dir)
}
