package stack

import (
	"context"

	"errors"
	"fmt"
	batchv1 "k8s.io/api/batch/v1"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/executor"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// JobExecutor runs one operation in a Job of its own (internal/executor.Job).
type JobExecutor interface {
	// Run starts the operation's Job and returns its result.
	Run(ctx context.Context, req executor.JobRequest) (runner.Result, error)
	// Adopt follows the running Job of an operation a stopped controller
	// started, and returns its result.
	Adopt(ctx context.Context, req executor.JobRequest) (runner.Result, error)
	// Find returns the operation's Job, or executor.ErrNoJob.
	Find(ctx context.Context, stack *v1alpha1.Stack, id string) (*batchv1.Job, error)
	// Remove deletes a Job, its Pod and its Secret.
	Remove(job *batchv1.Job)
}

// executorOf is where the Stack's operations run: its spec.runner.executor,
// else the controller's default, else Local.
func (r *StackReconciler) executorOf(stack *v1alpha1.Stack) string {
	if rs := stack.Spec.Runner; rs != nil && rs.Executor != "" {
		return rs.Executor
	}
	if r.DefaultExecutor != "" {
		return r.DefaultExecutor
	}
	return v1alpha1.ExecutorLocal
}

// hostOf is the host an operation runs on, which Pulumi writes into the
// stack's lock: this controller's, or the operation's own Pod's (whose host
// name is its Job's name).
func (r *StackReconciler) hostOf(stack *v1alpha1.Stack, id string) string {
	if r.executorOf(stack) == v1alpha1.ExecutorJob {
		return executor.JobName(stack.Name, id)
	}
	return r.Host
}

// executeJob runs the operation in a Job. The Pod fetches the program by
// digest from the artifact cache and the operation, secret inputs included,
// over the runner channel; no work tree is made here. The engine log and the
// live counts the Pod sends land where the Local executor's runner writes
// them, so `stackpilot logs` and status.currentOperation work the same.
func (r *StackReconciler) executeJob(ctx context.Context, st *reconcileState, id string, typ runner.OperationType,
	art artifact.Artifact, opts opOptions, fail func(runner.ErrorClass, error) *runner.Result) *runner.Result {
	if r.JobExecutor == nil {
		return fail(runner.ErrorInternal, errors.New("this controller runs no Job executor (see --runner-endpoint); set spec.runner.executor: Local or configure the controller"))
	}
	dir, err := programDirOf(st.stack.Spec.Source.Dir)
	if err != nil {
		return fail(runner.ErrorProgram, err)
	}
	workDir := filepath.Join(r.WorkDir, id)
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return fail(runner.ErrorInternal, err)
	}
	defer os.RemoveAll(workDir)

	// The Pod's own ServiceAccount token is the program's identity: no
	// kubeconfig is written, and none of the controller's is handed on.
	env := maps.Clone(st.inputs.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, opts.env)
	spec := r.operationSpec(ctx, st, id, typ, opts, env)
	spec.WorkDir = dir
	spec.LogFile = r.beginLog(ctx, st.stack, id)
	progressFile := filepath.Join(workDir, "progress.json")
	stopProgress := r.watchProgress(ctx, st.stack, id, progressFile)
	req := executor.JobRequest{
		Spec:           spec,
		Stack:          st.stack,
		ServiceAccount: st.inputs.ServiceAccount,
		Digest:         art.Digest,
		TreeDir:        art.Path,
		LogFile:        spec.LogFile,
		ProgressFile:   progressFile,
		// What changes nothing is cut short and run again (adopt_job.go).
		CancelOnStop: typ == runner.OpPreview || typ == runner.OpDriftCheck || typ == runner.OpOutputs,
	}
	run := r.JobExecutor.Run
	if opts.adopt {
		run = r.JobExecutor.Adopt
	}
	res, err := run(ctx, req)
	stopProgress()
	r.endLog(ctx, st.stack, id)
	var podErr *executor.PodError
	switch {
	case errors.Is(err, executor.ErrDetached) && !req.CancelOnStop:
		return nil
	case errors.As(err, &podErr):
		return fail(runner.ErrorRunnerPod, err)
	case err != nil:
		// The Pod died or vanished without reporting: Pulumi may have left
		// its lock behind, which the next operation may clear once the Pod
		// is provably gone (staleLock).
		res := fail(runner.ErrorInternal, err)
		res.Outcome = runner.Outcome(v1alpha1.OutcomeInterrupted)
		return res
	}
	return &res
}

// programDirOf is spec.source.dir as a clean path relative to the
// artifact's root; one that leads outside it is refused.
func programDirOf(dir string) (string, error) {
	if dir == "" {
		return ".", nil
	}
	clean := path.Clean(strings.ReplaceAll(dir, `\`, "/"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("spec.source.dir %q leads outside the source's root", dir)
	}
	return clean, nil
}
