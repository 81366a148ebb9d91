package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
)

// InterruptGrace bounds how long the pulumi CLI may take to stop after it got
// SIGINT, before it is killed. The executor normally ends a runner that is slow
// to cancel sooner (its cancel grace); this bound is for a runner used alone.
const InterruptGrace = 5 * time.Minute

// interruptibleCommand runs the pulumi CLI as the Automation API's own command
// does, and stops it differently: when the operation's context ends, the CLI
// gets SIGINT and then as long as it needs (up to grace) to finish the steps in
// flight, write its checkpoint and release the stack lock. The SDK's command
// kills the CLI 10s after SIGINT, which leaves the lock and pending operations
// in the state whenever a step takes longer, and orphans the plugins.
type interruptibleCommand struct {
	auto.PulumiCommand // for Version
	path               string
	grace              time.Duration
}

func (c interruptibleCommand) Run(ctx context.Context, workdir string, stdin io.Reader,
	stdout, stderr []io.Writer, env []string, args ...string,
) (string, string, int, error) {
	cmd := exec.CommandContext(ctx, c.path, nonInteractive(args)...)
	cmd.Dir = workdir
	cmd.Env = append(append(os.Environ(), env...), "PULUMI_AUTOMATION_API=true")
	if filepath.IsAbs(c.path) {
		// Plugins installed beside the CLI are found first, as with the SDK.
		cmd.Env = prependPath(cmd.Env, filepath.Dir(c.path))
	}
	var out, errOut strings.Builder
	cmd.Stdout = io.MultiWriter(append(slices.Clone(stdout), &out)...)
	cmd.Stderr = io.MultiWriter(append(slices.Clone(stderr), &errOut)...)
	cmd.Stdin = stdin
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = c.grace
	err := cmd.Run()
	code := -2 // the SDK's "unknown": the CLI did not run to an exit code
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exit.ExitCode()
	} else if err == nil {
		code = 0
	}
	return out.String(), errOut.String(), code, err
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
