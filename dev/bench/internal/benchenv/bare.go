package benchenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Bare is a plain Pulumi work dir, the "by hand" side of a comparison: the
// same pinned CLI and plugins and the same environment as the controller's
// (testenv.PulumiEnv, KUBECONFIG), its own file:// backend and PULUMI_HOME,
// and pulumi run through a Wrapper of its own, as the controller's is, so
// that both sides pay the same for it.
type Bare struct {
	Wrap    *Wrapper
	Stack   string
	work    string
	env     []string
	logPath string
	timeout time.Duration
}

// BareUp is one timed `pulumi up`.
type BareUp struct {
	Wall   time.Duration // as the benchmark timed it
	Inside time.Duration // the pulumi process's own wall time, from the wrapper's log
	CPU    time.Duration // user+system CPU of the pulumi process tree (wait4's rusage)
}

// NewBare prepares <Tmp>/<name>: work dir, state, PULUMI_HOME and a wrapper.
// Each pulumi call is bounded by timeout.
func (e *Env) NewBare(ctx context.Context, name, stack string, timeout time.Duration) (*Bare, error) {
	root := filepath.Join(e.Tmp, name)
	wrap, err := e.NewWrapper(ctx, name+"-wrap")
	if err != nil {
		return nil, err
	}
	b := &Bare{Wrap: wrap, Stack: stack, work: filepath.Join(root, "work"), logPath: filepath.Join(root, "pulumi.log"), timeout: timeout}
	for _, d := range []string{b.work, filepath.Join(root, "state"), filepath.Join(root, "pulumi-home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	b.env = append(e.PulumiEnv(),
		"PULUMI_BACKEND_URL=file://"+filepath.Join(root, "state"),
		"PULUMI_HOME="+filepath.Join(root, "pulumi-home"),
		"PULUMI_CONFIG_PASSPHRASE="+Passphrase,
	)
	return b, nil
}

func (b *Bare) pulumi(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	log, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "\n$ pulumi %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, b.Wrap.Pulumi(), args...)
	cmd.Dir, cmd.Env = b.work, b.env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pulumi %s: %v (see %s)", strings.Join(args, " "), err, b.logPath)
	}
	return nil
}

// SetUp writes program, creates the stack, writes config (full keys, YAML
// scalars: "kubernetes:enableConfigMapMutable": "true") into its stack file as
// the runner does, and runs the first up, untimed.
func (b *Bare) SetUp(ctx context.Context, program string, config map[string]string) error {
	if err := os.WriteFile(filepath.Join(b.work, "Pulumi.yaml"), []byte(program), 0o644); err != nil {
		return err
	}
	if err := b.pulumi(ctx, "stack", "init", b.Stack, "--non-interactive"); err != nil {
		return err
	}
	stackFile := filepath.Join(b.work, "Pulumi."+b.Stack+".yaml")
	data, err := os.ReadFile(stackFile)
	if err != nil {
		return err
	}
	if strings.Contains(string(data), "config:") {
		return fmt.Errorf("%s already has config: %s", stackFile, data)
	}
	keys := make([]string, 0, len(config))
	for k := range config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	data = append(data, "config:\n"...)
	for _, k := range keys {
		data = append(data, fmt.Sprintf("  %s: %s\n", k, config[k])...)
	}
	if err := os.WriteFile(stackFile, data, 0o644); err != nil {
		return err
	}
	return b.pulumi(ctx, "up", "--yes", "--skip-preview", "--non-interactive", "--stack", b.Stack)
}

// Up writes program and times `pulumi up --yes --skip-preview`.
func (b *Bare) Up(ctx context.Context, program string) (BareUp, error) {
	if err := os.WriteFile(filepath.Join(b.work, "Pulumi.yaml"), []byte(program), 0o644); err != nil {
		return BareUp{}, err
	}
	n, err := b.Wrap.Count()
	if err != nil {
		return BareUp{}, err
	}
	start := time.Now()
	err = b.pulumi(ctx, "up", "--yes", "--skip-preview", "--non-interactive", "--stack", b.Stack)
	wall := time.Since(start)
	if err != nil {
		return BareUp{}, err
	}
	calls, err := b.Wrap.CallsFrom(n)
	if err != nil {
		return BareUp{}, err
	}
	if len(calls) != 1 {
		return BareUp{}, fmt.Errorf("the bare up logged %d pulumi processes in %s, want 1", len(calls), b.Wrap.Dir)
	}
	return BareUp{Wall: wall, Inside: calls[0].Duration(), CPU: calls[0].CPU()}, nil
}
