package opchannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// PodOptions are what a runner Pod is started with.
type PodOptions struct {
	Endpoint       string // https://host:port of the controller's runner channel
	CAFile         string // PEM to trust for it
	CredentialFile string // the per-operation credential (mounted read-only from the per-operation Secret)
	OperationID    string
	WorkRoot       string // a writable emptyDir: the tree, PULUMI_HOME, the engine log and progress live under it
}

// How long the Pod keeps asking a controller that does not answer.
var (
	// fetchPatience: for the spec, the tree and the plan, before the run.
	fetchPatience = 2 * time.Minute
	// resultPatience: for the result (and a preview's plan). The controller
	// may be restarting; the Job's activeDeadlineSeconds ends the Pod anyway.
	resultPatience = 10 * time.Minute
	// flushPatience: for the engine log's end and the last counts.
	flushPatience = 30 * time.Second
)

// The files of the work root.
const (
	treeDir      = "tree"
	pulumiHome   = "home/.pulumi"
	engineLog    = "engine.log"
	progressJSON = "progress.json"
	planFile     = "plan.json"
)

// RunPod runs one operation in a runner Pod: it fetches the spec and the
// tree, checks the tree's digest, runs the runner with a context cancelled
// by SIGTERM (Pulumi then gets its SIGINT and writes its checkpoint), ships
// the engine log and the counts while it runs, and delivers the result,
// retrying while the controller does not take it. Whatever fails before the
// run is delivered as a failed result. It returns nil once a result was
// accepted; an error means the controller has none from this Pod.
func RunPod(ctx context.Context, o PodOptions) error {
	if o.WorkRoot == "" {
		return errors.New("runner pod: no work root")
	}
	c, err := newPodClient(o)
	if err != nil {
		return fmt.Errorf("runner pod: %w", err)
	}
	if err := podEnv(o.WorkRoot); err != nil {
		return fmt.Errorf("runner pod: %w", err)
	}
	// SIGTERM (the Pod is deleted: cancel, timeout, shutdown) stops fetching
	// and running; shipping and delivering go on until the kubelet kills the
	// Pod after its grace period.
	runCtx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	res := operation(runCtx, ctx, c, o)
	if err := deliver(ctx, c, res); err != nil {
		return fmt.Errorf("runner pod: the result of operation %s was not delivered: %w", o.OperationID, err)
	}
	return nil
}

// operation returns the operation's result, a failed one when it could not
// run. runCtx ends at SIGTERM; ctx goes on.
func operation(runCtx, ctx context.Context, c *podClient, o PodOptions) runner.Result {
	started := time.Now().UTC()
	var ps podSpec
	err := retry(runCtx, fetchPatience, func(ctx context.Context) (err error) {
		ps, err = c.getSpec(ctx)
		return err
	})
	if err != nil {
		return failed(runCtx, runner.Spec{ID: o.OperationID}, started, runner.ErrorInternal, fmt.Errorf("fetching the operation's spec: %w", err))
	}
	spec := ps.Spec
	switch {
	case spec.ID != o.OperationID:
		return failed(runCtx, runner.Spec{ID: o.OperationID}, started, runner.ErrorInternal, fmt.Errorf("the controller sent the spec of operation %q", spec.ID))
	case spec.APIVersion != runner.APIVersion:
		return failed(runCtx, spec, started, runner.ErrorInternal, fmt.Errorf("the spec's apiVersion is %q; this runner reads %q", spec.APIVersion, runner.APIVersion))
	}
	spec, class, err := prepare(runCtx, c, o, ps)
	if err != nil {
		return failed(runCtx, spec, started, class, err)
	}
	cache, err := dependencies(runCtx, c, o, &spec)
	if err != nil {
		class := runner.ErrorInternal
		if _, ok := errors.AsType[*runner.DepsError](err); ok {
			class = runner.ErrorProgram
		}
		res := failed(runCtx, spec, started, class, fmt.Errorf("installing the program's dependencies: %w", err))
		res.DependencyCache = cache
		return res
	}
	res := run(runCtx, ctx, c, spec)
	res.DependencyCache = cache
	return res
}

// failed is the result of an operation that did not run. Its message is
// redacted of the spec's secret values, as the runner's are.
func failed(runCtx context.Context, spec runner.Spec, started time.Time, class runner.ErrorClass, err error) runner.Result {
	res := runner.Result{
		APIVersion: runner.APIVersion, ID: spec.ID, Type: spec.Type,
		Outcome: runner.OutcomeFailed, ErrorClass: class,
		Message:   runner.Redact(spec, err.Error()+"; nothing was run"),
		StartedAt: started, FinishedAt: time.Now().UTC(),
	}
	if runCtx.Err() != nil {
		res.Outcome, res.ErrorClass = runner.OutcomeCancelled, runner.ErrorNone
	}
	return res
}

// prepare fetches and checks the tree, then points the spec at the Pod's
// files. The error class says who has to act.
func prepare(ctx context.Context, c *podClient, o PodOptions, ps podSpec) (runner.Spec, runner.ErrorClass, error) {
	spec := ps.Spec
	tree := filepath.Join(o.WorkRoot, treeDir)
	if err := fetchTree(ctx, c, tree); err != nil {
		return spec, runner.ErrorInternal, fmt.Errorf("fetching the program tree: %w", err)
	}
	got, err := artifact.Digest(ctx, tree)
	if err != nil {
		return spec, runner.ErrorInternal, fmt.Errorf("computing the program tree's digest: %w", err)
	}
	if got != ps.Digest {
		return spec, runner.ErrorInternal, fmt.Errorf("the program tree received has digest %s, not the operation's %s", got, ps.Digest)
	}
	if filepath.IsAbs(spec.WorkDir) {
		return spec, runner.ErrorProgram, fmt.Errorf("the program directory %q is not relative to the source", spec.WorkDir)
	}
	workDir, err := artifact.SubdirPath(tree, spec.WorkDir)
	if err != nil {
		return spec, runner.ErrorProgram, fmt.Errorf("the program directory: %w", err)
	}
	spec.WorkDir = workDir
	for i, p := range spec.PolicyPacks {
		// The packs came in the tree, beside the program.
		if filepath.IsAbs(p.Dir) {
			return spec, runner.ErrorPolicyPack, fmt.Errorf("policy pack %q: its folder %q is not relative to the tree", p.Name, p.Dir)
		}
		dir, err := artifact.SubdirPath(tree, p.Dir)
		if err != nil {
			return spec, runner.ErrorPolicyPack, fmt.Errorf("policy pack %q: %w", p.Name, err)
		}
		spec.PolicyPacks[i].Dir = dir
	}
	spec.LogFile = filepath.Join(o.WorkRoot, engineLog)
	spec.ProgressFile = filepath.Join(o.WorkRoot, progressJSON)
	spec.PulumiHome = filepath.Join(o.WorkRoot, pulumiHome)
	spec.PulumiCommand = "" // the image's pulumi, from PATH
	if err := os.MkdirAll(spec.PulumiHome, 0o700); err != nil {
		return spec, runner.ErrorInternal, err
	}
	if spec.Plan != "" {
		spec.Plan = filepath.Join(o.WorkRoot, planFile)
		if spec.Type == runner.OpUp {
			if err := fetchPlan(ctx, c, spec.Plan); err != nil {
				return spec, runner.ErrorInternal, fmt.Errorf("fetching the plan: %w", err)
			}
		}
	}
	return spec, runner.ErrorNone, nil
}

// final marks an error that asking again will not change.
type final struct{ err error }

func (f *final) Error() string { return f.err.Error() }
func (f *final) Unwrap() error { return f.err }

// fetchTree unpacks the artifact into tree, which must not exist (a fresh
// work root), with artifact.Untar's refusals and default limits.
func fetchTree(ctx context.Context, c *podClient, tree string) error {
	if _, err := os.Lstat(tree); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s exists: the work root must be fresh", tree)
	}
	return retry(ctx, fetchPatience, func(ctx context.Context) error {
		if err := os.RemoveAll(tree); err != nil { // a partial tree of an attempt cut short
			return &final{err}
		}
		body, err := c.getBody(ctx, "artifact")
		if err != nil {
			return err
		}
		defer body.Close()
		err = artifact.Untar(body, tree, artifact.Limits{})
		if _, ok := errors.AsType[*artifact.UnsafePathError](err); ok {
			return &final{err}
		}
		if _, ok := errors.AsType[*artifact.LimitError](err); ok {
			return &final{err}
		}
		return err
	})
}

// fetchPlan writes the approved plan to path; none there leaves no file
// (the runner then fails the up with ErrorPlanInvalid).
func fetchPlan(ctx context.Context, c *podClient, path string) error {
	return retry(ctx, fetchPatience, func(ctx context.Context) error {
		body, err := c.getBody(ctx, "plan")
		if se, ok := errors.AsType[*StatusError](err); ok && se.Code == http.StatusNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		defer body.Close()
		b, err := io.ReadAll(io.LimitReader(body, MaxPlanBytes+1))
		if err != nil {
			return err
		}
		if len(b) > MaxPlanBytes {
			return &final{fmt.Errorf("the plan is larger than %d bytes", MaxPlanBytes)}
		}
		return os.WriteFile(path, b, 0o600)
	})
}

// run runs the operation while a shipper sends its log and counts, then
// sends what is left of them and a preview's plan.
func run(runCtx, ctx context.Context, c *podClient, spec runner.Spec) runner.Result {
	sh := &shipper{c: c, logPath: spec.LogFile, progressPath: spec.ProgressFile}
	shipCtx, stopShipping := context.WithCancel(ctx)
	shipped := make(chan struct{})
	go func() {
		defer close(shipped)
		sh.loop(shipCtx)
	}()
	res := runner.Run(runCtx, spec)
	stopShipping()
	<-shipped
	_ = retry(ctx, flushPatience, sh.ship) // best effort: the result matters more
	if spec.Type == runner.OpPreview && spec.Plan != "" && res.Outcome == runner.OutcomeSucceeded {
		if err := sendFile(ctx, c, "plan", spec.Plan); err != nil {
			res.Outcome, res.ErrorClass = runner.OutcomeFailed, runner.ErrorInternal
			res.Message = fmt.Sprintf("the preview saved a plan the controller did not take: %v", err)
		} else {
			// The prior inputs the runner kept beside the plan, when it kept
			// them: best effort, as in the runner (the plan applies without).
			_ = sendFile(ctx, c, "plan-inputs", runner.PlanInputsFile(spec.Plan))
		}
	}
	return res
}

// sendFile puts the file at path to the operation's endpoint what ("plan",
// "plan-inputs") until the controller takes it.
func sendFile(ctx context.Context, c *podClient, what, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return retry(ctx, resultPatience, func(ctx context.Context) error {
		_, err := c.send(ctx, http.MethodPut, what, nil, b)
		return err
	})
}

// deliver puts the result until the controller takes it.
func deliver(ctx context.Context, c *podClient, res runner.Result) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return retry(ctx, resultPatience, func(ctx context.Context) error {
		_, err := c.send(ctx, http.MethodPut, "result", nil, b)
		return err
	})
}
