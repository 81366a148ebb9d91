package runner

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
)

// Run performs one operation with the Pulumi Automation API. It always returns a
// Result, whatever happens (a panic included), and its Message never holds a
// value of spec.Env or of a secret config value.
func Run(ctx context.Context, spec Spec) (res Result) {
	res = Result{APIVersion: APIVersion, ID: spec.ID, Type: spec.Type, StartedAt: time.Now().UTC()}
	defer func() {
		if r := recover(); r != nil {
			res.Outcome, res.ErrorClass = OutcomeFailed, ErrorInternal
			res.Message = fmt.Sprintf("runner panic: %v", r)
		}
		res.Message = newScrubber(spec).scrub(res.Message)
		res.FinishedAt = time.Now().UTC()
	}()

	opCtx, cancel := ctx, context.CancelFunc(func() {})
	if spec.Timeout > 0 {
		opCtx, cancel = context.WithTimeout(ctx, time.Duration(spec.Timeout))
	}
	defer cancel()

	o := &operation{
		spec:   spec,
		events: newEventCollector(spec.Type == OpRefresh || spec.Type == OpDriftCheck),
		stderr: &tailBuffer{max: 64 << 10},
	}
	err := o.run(opCtx, &res)
	forgetWorkspace(spec)
	res.Changes = o.events.counts()
	res.Resources = o.events.changes()
	if err == nil {
		res.Outcome = OutcomeSucceeded
		return res
	}
	f := failure{err: err, diags: o.events.errors(), stderr: o.stderr.String(), timeout: spec.Timeout}
	f.timedOut, f.cancelled = contextFailure(ctx, opCtx)
	res.Outcome, res.ErrorClass = classify(f)
	res.Message = message(f, res.ErrorClass)
	return res
}

// operation is the state of one Run.
type operation struct {
	spec   Spec
	events *eventCollector
	stderr *tailBuffer // the CLI's stderr during the engine run
}

func (o *operation) run(ctx context.Context, res *Result) error {
	spec := o.spec
	if err := validate(spec); err != nil {
		return stepErr(phaseSpec, err)
	}
	project, err := ProjectName(spec.WorkDir)
	if err != nil {
		return stepErr(phaseProject, err)
	}
	config, err := prepareConfig(project, spec.Config)
	if err != nil {
		return stepErr(phaseProject, err)
	}
	if err := prepareBackend(spec.Backend); err != nil {
		return stepErr(phaseStack, err)
	}
	cmd, err := pulumiCommand(spec.PulumiCommand)
	if err != nil {
		return stepErr(phaseCommand, err)
	}
	if spec.Type == OpOutputs {
		// Reading must not create a stack, nor needs the config.
		stack, err := auto.SelectStackLocalSource(ctx, spec.StackName, spec.WorkDir, workspaceOptions(spec, cmd)...)
		if err != nil {
			return stepErr(phaseStack, err)
		}
		if err := o.claim(ctx, stack, res); err != nil {
			return err
		}
		out, err := stack.Outputs(ctx)
		if err != nil {
			return err
		}
		res.Outputs = outputs(out)
		return nil
	}
	stack, err := auto.UpsertStackLocalSource(ctx, spec.StackName, spec.WorkDir, workspaceOptions(spec, cmd)...)
	if err != nil {
		return stepErr(phaseStack, err)
	}
	// The claim comes first: a stack of another Stack is neither configured,
	// unlocked nor run.
	if err := o.claim(ctx, stack, res); err != nil {
		return err
	}
	if err := applyConfig(ctx, stack, spec, config); err != nil {
		return stepErr(phaseConfig, err)
	}
	n, err := clearStaleLock(spec, project)
	res.ClearedLocks = n
	if err != nil {
		return stepErr(phaseLock, err)
	}
	return o.execute(ctx, stack, res)
}

// claim checks (and, when free, takes) the stack's ownership for spec.Claim.
func (o *operation) claim(ctx context.Context, stack auto.Stack, res *Result) error {
	if o.spec.Claim == "" {
		return nil
	}
	owner, err := claimStack(ctx, stack, o.spec)
	if _, ok := errors.AsType[*ClaimedError](err); ok {
		res.ClaimedBy = owner
	}
	return stepErr(phaseClaim, err)
}

// validate rejects specs no Pulumi run can satisfy.
func validate(spec Spec) error {
	switch {
	case spec.APIVersion != "" && spec.APIVersion != APIVersion:
		return &SpecError{Reason: fmt.Sprintf("apiVersion %q, this runner speaks %q", spec.APIVersion, APIVersion)}
	case spec.ID == "":
		return &SpecError{Reason: "id is empty"}
	case spec.WorkDir == "":
		return &SpecError{Reason: "workDir is empty"}
	case !filepath.IsAbs(spec.WorkDir):
		return &SpecError{Reason: "workDir must be absolute"}
	case spec.StackName == "":
		return &SpecError{Reason: "stackName is empty"}
	case spec.Backend == "":
		// Never fall back to whatever the environment is logged in to.
		return &SpecError{Reason: "backend is empty"}
	}
	switch spec.Type {
	case OpPreview, OpUp, OpRefresh, OpDestroy, OpDriftCheck, OpOutputs:
		return nil
	default:
		return &SpecError{Reason: fmt.Sprintf("unknown operation type %q", spec.Type)}
	}
}

// pulumiCommand finds the CLI. The Automation API looks for <root>/bin/pulumi,
// so an explicit binary must be named pulumi and live in a bin directory.
func pulumiCommand(path string) (auto.PulumiCommand, error) {
	root := ""
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		if filepath.Base(abs) != "pulumi" || filepath.Base(filepath.Dir(abs)) != "bin" {
			return nil, &SpecError{Reason: fmt.Sprintf("pulumiCommand %q must be <dir>/bin/pulumi", path)}
		}
		root = filepath.Dir(filepath.Dir(abs))
	}
	// The pinned CLI is what we test against; its version is not the SDK's concern.
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: root, SkipVersionCheck: true})
	if err != nil {
		return nil, err
	}
	bin := "pulumi"
	if root != "" {
		bin = filepath.Join(root, "bin", "pulumi")
	}
	return interruptibleCommand{PulumiCommand: cmd, path: bin, grace: InterruptGrace}, nil
}

// workspaceEnv is the environment of every CLI call. Spec.Backend and
// Spec.PulumiHome win over Spec.Env: the controller chose them for this stack.
func workspaceEnv(spec Spec) map[string]string {
	env := map[string]string{
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		// The work dir is fresh for every operation, so the stack file has no
		// encryption salt after the first run: take the secrets manager from the
		// stack's state instead of creating a new one.
		"PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
	}
	maps.Copy(env, spec.Env)
	// The Automation API passes --yes itself wherever it is needed; the variable
	// would add it to `refresh --preview-only` (drift-check), which refuses it.
	env["PULUMI_SKIP_CONFIRMATIONS"] = "false"
	env["PULUMI_BACKEND_URL"] = spec.Backend
	if spec.PulumiHome != "" {
		env["PULUMI_HOME"] = spec.PulumiHome
	}
	return env
}

func workspaceOptions(spec Spec, cmd auto.PulumiCommand) []auto.LocalWorkspaceOption {
	opts := []auto.LocalWorkspaceOption{
		auto.Pulumi(cmd),
		auto.EnvVars(workspaceEnv(spec)),
	}
	if spec.PulumiHome != "" {
		opts = append(opts, auto.PulumiHome(spec.PulumiHome))
	}
	if spec.SecretsProvider != "" {
		opts = append(opts, auto.SecretsProvider(spec.SecretsProvider))
	}
	return opts
}

// execute runs the engine for the operation type, streaming its events into
// the collector.
func (o *operation) execute(ctx context.Context, stack auto.Stack, res *Result) error {
	ch := make(chan events.EngineEvent)
	stop := o.events.consume(ch)
	defer stop()

	spec := o.spec
	msg := "stackpilot operation " + spec.ID
	var err error
	switch spec.Type {
	case OpUp:
		opts := []optup.Option{optup.EventStreams(ch), optup.ErrorProgressStreams(o.stderr),
			optup.Color("never"), optup.SuppressProgress(), optup.Message(msg)}
		if spec.Refresh {
			opts = append(opts, optup.Refresh())
		}
		if len(spec.Targets) > 0 {
			opts = append(opts, optup.Target(spec.Targets))
		}
		var up auto.UpResult
		if up, err = stack.Up(ctx, opts...); err == nil {
			res.Outputs = outputs(up.Outputs)
		}
	case OpPreview:
		opts := []optpreview.Option{optpreview.EventStreams(ch), optpreview.ErrorProgressStreams(o.stderr),
			optpreview.Color("never"), optpreview.SuppressProgress(), optpreview.Message(msg)}
		if spec.Refresh {
			opts = append(opts, optpreview.Refresh())
		}
		if len(spec.Targets) > 0 {
			opts = append(opts, optpreview.Target(spec.Targets))
		}
		_, err = stack.Preview(ctx, opts...)
	case OpRefresh, OpDriftCheck:
		opts := []optrefresh.Option{optrefresh.EventStreams(ch), optrefresh.ErrorProgressStreams(o.stderr),
			optrefresh.Color("never"), optrefresh.SuppressProgress(), optrefresh.Message(msg)}
		if len(spec.Targets) > 0 {
			opts = append(opts, optrefresh.Target(spec.Targets))
		}
		if spec.Type == OpDriftCheck {
			// `pulumi refresh --preview-only`: what differs, without writing state.
			_, err = stack.PreviewRefresh(ctx, opts...)
		} else {
			_, err = stack.Refresh(ctx, opts...)
		}
	case OpDestroy:
		opts := []optdestroy.Option{optdestroy.EventStreams(ch), optdestroy.ErrorProgressStreams(o.stderr),
			optdestroy.Color("never"), optdestroy.SuppressProgress(), optdestroy.Message(msg)}
		if spec.Refresh {
			opts = append(opts, optdestroy.Refresh())
		}
		if len(spec.Targets) > 0 {
			opts = append(opts, optdestroy.Target(spec.Targets))
		}
		_, err = stack.Destroy(ctx, opts...)
	}
	return stepErr(phaseOperation, err)
}

func outputs(m auto.OutputMap) map[string]Output {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]Output, len(m))
	for k, v := range m {
		out[k] = Output{Value: v.Value, Secret: v.Secret}
	}
	return out
}

// forgetWorkspace removes the file in which `pulumi stack select` recorded the
// work dir's selected stack: $PULUMI_HOME/workspaces/<project>-<sha1 of the
// Pulumi.yaml path>-workspace.json. Every operation has a new work dir, so a
// shared PULUMI_HOME would otherwise gain one file per operation, forever.
func forgetWorkspace(spec Spec) {
	project, err := ProjectName(spec.WorkDir)
	if err != nil {
		return
	}
	home := workspaceEnv(spec)["PULUMI_HOME"]
	if home == "" {
		home = os.Getenv("PULUMI_HOME")
	}
	if home == "" {
		userHome, err := os.UserHomeDir()
		if err != nil {
			return
		}
		home = filepath.Join(userHome, ".pulumi")
	}
	for _, name := range projectFileNames {
		path := filepath.Join(spec.WorkDir, name)
		if real, err := filepath.EvalSymlinks(path); err == nil {
			sum := sha1.Sum([]byte(real)) //nolint:gosec // the CLI's file name, not a security use
			_ = os.Remove(filepath.Join(home, "workspaces", project+"-"+hex.EncodeToString(sum[:])+"-workspace.json"))
			return
		}
	}
}

// tailBuffer keeps the last max bytes written to it: Pulumi's error lines come
// at the end, and a long run must not grow the runner's memory without bound.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if len(t.buf) >= t.max {
		// The cut may have split a line: drop the partial first line.
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}
