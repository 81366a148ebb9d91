package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// depsLines is how many of a failed install's last lines its message keeps.
const depsLines = 20

// run runs one command of a dependency install in the program's folder with
// the Pod's environment, Spec.Env and d.Env (the install's own locations
// win: the cache restores them there), keeping the last keep bytes of its
// output. A cancelled context kills the command and what it started (npm
// runs node, pip runs compilers).
func (d *Deps) run(ctx context.Context, s step, env map[string]string, keep int) (string, error) {
	cmd := exec.CommandContext(ctx, s.name, s.args...)
	cmd.Dir = d.dir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range d.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &tailBuffer{max: keep}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error {
		KillProcessTree(cmd.Process.Pid)
		return nil
	}
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if err == nil {
		return out.String(), nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("%s: %w", s, ctx.Err())
	}
	if errors.Is(err, exec.ErrNotFound) {
		return "", &DepsError{Reason: fmt.Sprintf("%s: %s is not on the image's PATH (the %s runtime's %s dependencies need it)", s, s.name, d.Runtime, d.Manager)}
	}
	return "", &DepsError{Reason: fmt.Sprintf("%s failed (%v):\n%s", s, err, lastLines(out.String(), depsLines))}
}

// lastLines is the end of text: its last n non-empty lines.
func lastLines(text string, n int) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimRight(l, "\r "); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
