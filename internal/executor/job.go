package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/opchannel"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// Channel is the controller's end of the authenticated channel runner Pods
// fetch their operation from and report to (internal/opchannel.Server).
type Channel interface {
	Register(op opchannel.Operation) (credential string, err error)
	Adopt(op opchannel.Operation, credentialHash string) error
	Result(id string) <-chan runner.Result
	Unregister(id string)
}

// Defaults of the Job executor.
const (
	// DefaultPendingTimeout is how long a runner Pod may wait to be
	// scheduled and started (image pull included) before the operation fails.
	DefaultPendingTimeout = 5 * time.Minute
	// DefaultTTLAfterFinished keeps a finished Job this long if the
	// controller could not delete it itself.
	DefaultTTLAfterFinished = 10 * time.Minute
	// resultAfterExit is how long a result may trail the Pod's end: the
	// runner reports before it exits, but the report and the Pod's status
	// travel different ways.
	resultAfterExit = 15 * time.Second
)

// Job runs each operation as a Kubernetes Job of one Pod in the Stack's
// namespace, acting as the Stack's ServiceAccount. The Pod holds the
// runner (copied in from RunnerImage by an init container) and fetches the
// program, the operation and its secret inputs over the Channel with a
// credential bound to the Stack, the operation and the program's digest.
// Use it through a pointer; do not copy it.
type Job struct {
	// Client creates Jobs and Secrets and watches Pods. It must not be a
	// cached client: it reads Pods of one operation by label.
	Client client.WithWatch
	// Channel serves the operations to their Pods.
	Channel Channel
	// Endpoint is the channel's https URL as Pods reach it; CAPEM the
	// certificate authority they check it with.
	Endpoint string
	CAPEM    []byte
	// RunnerImage is the controller's image: the runner is copied from it,
	// and Stacks that name no image of their own run in it.
	RunnerImage string
	// Concurrency bounds the Jobs alive at once; less than 1 means 1.
	Concurrency int
	// KillGrace, CancelGrace: as for Local. PendingTimeout: how long a Pod
	// may take to start; zero means DefaultPendingTimeout.
	KillGrace, CancelGrace, PendingTimeout time.Duration

	initOnce sync.Once
	slots    chan struct{}
	started  atomic.Int64
	running  atomic.Int32
}

// JobRequest is one operation for the Job executor.
type JobRequest struct {
	// Spec is the operation; its WorkDir is the program's folder relative
	// to the artifact's root (spec.source.dir).
	Spec runner.Spec
	// Stack owns the Job; its namespace, UID and spec.runner place it.
	Stack *v1alpha1.Stack
	// ServiceAccount the Pod runs as: never empty (a Job never runs as the
	// controller).
	ServiceAccount string
	// Digest and TreeDir: the program's artifact.
	Digest, TreeDir string
	// LogFile and ProgressFile: where the engine log and the live counts the
	// Pod sends are written on the controller's side.
	LogFile, ProgressFile string
	// CancelOnStop cancels the operation when the controller stops, as the
	// Local executor does, instead of leaving its Job to run on for the next
	// controller to adopt: for operations that change nothing.
	CancelOnStop bool
}

// Started counts the Jobs created since the executor was created.
func (j *Job) Started() int64 { return j.started.Load() }

// Running is the number of Jobs this executor waits on now.
func (j *Job) Running() int { return int(j.running.Load()) }

// PodError says the runner Pod could not run the operation at all: its
// image could not be pulled, it was never scheduled, or the namespace's
// quota refused it. Nothing ran; the operation failed.
type PodError struct {
	Reason  string // ImagePullBackOff, Unschedulable, QuotaExceeded, ...
	Image   string
	Message string
}

func (e *PodError) Error() string {
	switch {
	case strings.Contains(e.Reason, "Image"):
		return fmt.Sprintf("RunnerPodFailed: %s for %s: %s", e.Reason, describeImage(e.Image), e.Message)
	default:
		return fmt.Sprintf("RunnerPodFailed: %s: %s", e.Reason, e.Message)
	}
}

// ErrPodGone is the cause of a RunnerError whose Pod vanished (deleted,
// evicted, its node lost) or ended without reporting.
var ErrPodGone = errors.New("the runner Pod ended without reporting a result")

func (j *Job) init() {
	j.initOnce.Do(func() { j.slots = make(chan struct{}, max(j.Concurrency, 1)) })
}

// Run runs the operation in a Job and returns its result. An error means
// there is no result: the Job never ran the operation (*PodError, or the
// API refused it), or its Pod died without reporting (*RunnerError).
func (j *Job) Run(ctx context.Context, req JobRequest) (runner.Result, error) {
	if err := j.check(req); err != nil {
		return runner.Result{}, err
	}
	j.init()
	select {
	case j.slots <- struct{}{}:
	case <-ctx.Done():
		return runner.Result{}, fmt.Errorf("operation %s: waiting for a free Job slot: %w", req.Spec.ID, ctx.Err())
	}
	defer func() { <-j.slots }()
	if err := ctx.Err(); err != nil {
		return runner.Result{}, fmt.Errorf("operation %s not started: %w", req.Spec.ID, err)
	}
	j.running.Add(1)
	defer j.running.Add(-1)

	name := JobName(req.Stack.Name, req.Spec.ID)
	op := channelOperation(req)
	credential, err := j.Channel.Register(op)
	if err != nil {
		return runner.Result{}, fmt.Errorf("operation %s: %w", req.Spec.ID, err)
	}
	defer j.Channel.Unregister(req.Spec.ID)
	job, err := j.create(ctx, req, name, credential)
	if err != nil {
		return runner.Result{}, err
	}
	j.started.Add(1)
	return j.follow(ctx, req, job)
}

// follow waits for the Job's result and removes the Job after it, unless
// the controller stops first: then the Job runs on, for the next
// controller to adopt (Adopt).
func (j *Job) follow(ctx context.Context, req JobRequest, job *batchv1.Job) (runner.Result, error) {
	res, err := j.wait(ctx, req.Spec, job, req.CancelOnStop)
	if !errors.Is(err, ErrDetached) {
		j.Remove(job)
	}
	return res, err
}

// ErrDetached says the controller is stopping while the operation's Job
// runs: the Job is left to run to its end, and the next controller adopts
// it (Adopt) and records its result. Nothing is recorded now.
var ErrDetached = errors.New("the controller is stopping: the operation's Job runs on, for the next controller to adopt")

// ErrNoJob says there is no Job of the operation to adopt.
var ErrNoJob = errors.New("no Job of the operation is left")

// Find returns the Job of operation id of the Stack, or ErrNoJob. A Job of
// that name that another object owns (a Stack deleted and made again with
// the same name) is none of the Stack's.
func (j *Job) Find(ctx context.Context, stack *v1alpha1.Stack, id string) (*batchv1.Job, error) {
	var jobs batchv1.JobList
	if err := j.Client.List(ctx, &jobs, client.InNamespace(stack.Namespace), client.MatchingLabels{LabelOperation: id}); err != nil {
		return nil, err
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if job.Annotations[AnnotationStackUID] == string(stack.UID) && job.DeletionTimestamp.IsZero() {
			return job, nil
		}
	}
	return nil, ErrNoJob
}

// Adopt follows the Job a previous controller started for req's
// operation, which still runs: the channel takes the Pod's reports again
// (the credential's hash is on the Job), and its result is returned as if
// this controller had started it. It counts against Concurrency.
func (j *Job) Adopt(ctx context.Context, req JobRequest) (runner.Result, error) {
	if err := j.check(req); err != nil {
		return runner.Result{}, err
	}
	job, err := j.Find(ctx, req.Stack, req.Spec.ID)
	if err != nil {
		return runner.Result{}, err
	}
	j.init()
	select {
	case j.slots <- struct{}{}:
	case <-ctx.Done():
		return runner.Result{}, ErrDetached
	}
	defer func() { <-j.slots }()
	j.running.Add(1)
	defer j.running.Add(-1)
	if err := j.Channel.Adopt(channelOperation(req), job.Annotations[AnnotationCredentialHash]); err != nil {
		return runner.Result{}, fmt.Errorf("operation %s: adopting Job %s: %w", req.Spec.ID, job.Name, err)
	}
	defer j.Channel.Unregister(req.Spec.ID)
	return j.follow(ctx, req, job)
}

func (j *Job) check(req JobRequest) error {
	switch {
	case j.Client == nil || j.Channel == nil:
		return errors.New("executor: Job.Client and Job.Channel must be set")
	case j.RunnerImage == "":
		return errors.New("executor: Job.RunnerImage is empty (--runner-image)")
	case req.Stack == nil || req.Stack.UID == "":
		return errors.New("executor: a Job operation needs its Stack")
	case req.ServiceAccount == "":
		return fmt.Errorf("executor: Stack %s/%s has no ServiceAccount: a Job never runs as the controller", req.Stack.Namespace, req.Stack.Name)
	case req.Digest == "" || req.TreeDir == "":
		return fmt.Errorf("executor: operation %s has no program artifact", req.Spec.ID)
	}
	return nil
}

func channelOperation(req JobRequest) opchannel.Operation {
	return opchannel.Operation{
		ID:           req.Spec.ID,
		StackUID:     string(req.Stack.UID),
		Stack:        req.Stack.Namespace + "/" + req.Stack.Name,
		Spec:         req.Spec,
		Digest:       req.Digest,
		TreeDir:      req.TreeDir,
		LogFile:      req.LogFile,
		ProgressFile: req.ProgressFile,
		Expires:      time.Now().Add(time.Duration(req.Spec.Timeout) + 2*time.Hour),
	}
}

func (j *Job) killGrace() time.Duration {
	if j.KillGrace > 0 {
		return j.KillGrace
	}
	return DefaultKillGrace
}

func (j *Job) cancelGrace() time.Duration {
	if j.CancelGrace > 0 {
		return j.CancelGrace
	}
	return DefaultCancelGrace
}

func (j *Job) pendingTimeout() time.Duration {
	if j.PendingTimeout > 0 {
		return j.PendingTimeout
	}
	return DefaultPendingTimeout
}

// create makes the per-operation Secret (owned by the Stack until the Job
// exists, then by the Job, so it goes with it) and the Job.
func (j *Job) create(ctx context.Context, req JobRequest, name, credential string) (*batchv1.Job, error) {
	image := j.RunnerImage
	if rs := req.Stack.Spec.Runner; rs != nil && rs.Image != "" {
		image = rs.Image
	}
	timeout := time.Duration(req.Spec.Timeout)
	p := jobParams{
		Name:             name,
		OperationID:      req.Spec.ID,
		OperationType:    string(req.Spec.Type),
		Stack:            req.Stack,
		ServiceAccount:   req.ServiceAccount,
		Image:            image,
		RunnerImage:      j.RunnerImage,
		Endpoint:         j.Endpoint,
		CAPEM:            j.CAPEM,
		Credential:       credential,
		Digest:           req.Digest,
		ActiveDeadline:   timeout + j.killGrace() + j.cancelGrace() + j.pendingTimeout(),
		TerminationGrace: j.cancelGrace(),
		TTLAfterFinished: DefaultTTLAfterFinished,
	}
	stackOwner := ownerReference(req.Stack, v1alpha1.GroupVersion.String(), v1alpha1.StackKind, true)

	secret := buildSecret(p)
	secret.OwnerReferences = []metav1.OwnerReference{stackOwner}
	if err := j.Client.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("operation %s: creating the runner's Secret %s: %w", req.Spec.ID, secret.Name, err)
	}
	job := buildJob(p, opchannel.CredentialHash(credential))
	job.OwnerReferences = []metav1.OwnerReference{stackOwner}
	if err := j.Client.Create(ctx, job); err != nil {
		_ = j.Client.Delete(context.WithoutCancel(ctx), secret)
		return nil, fmt.Errorf("operation %s: creating Job %s: %w", req.Spec.ID, job.Name, err)
	}
	// The Secret goes with the Job from now on (the Job's own TTL included).
	patch := client.MergeFrom(secret.DeepCopy())
	secret.OwnerReferences = []metav1.OwnerReference{ownerReference(job, "batch/v1", "Job", false)}
	// On failure it stays the Stack's, and remove deletes it with the Job.
	_ = j.Client.Patch(ctx, secret, patch)
	return job, nil
}

// Remove deletes the Job, its Pod and its Secret: no Pod is left between
// operations. It runs on a context of its own: it must happen when the
// operation's ended too.
func (j *Job) Remove(job *batchv1.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	_ = client.IgnoreNotFound(j.Client.Delete(ctx, job, &client.DeleteOptions{PropagationPolicy: &bg}))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: CredentialSecretName(job.Name)}}
	_ = client.IgnoreNotFound(j.Client.Delete(ctx, secret))
}

// podsOf lists the operation's Pod(s).
func (j *Job) podsOf(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := j.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{LabelOperation: job.Labels[LabelOperation]})
	return pods.Items, err
}
