package executor

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/controlplane"
	"github.com/stackpilot/stackpilot/internal/opchannel"
	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// A real API server with the Job, ResourceQuota and garbage collector
// controllers, started once for the Job tests that need it (there is no
// kubelet: Pods are created, never run; what a kubelet would report is
// written into their status by the test).
var (
	jobEnvOnce sync.Once
	jobEnvCP   *controlplane.ControlPlane
	jobEnvC    client.WithWatch
	jobEnvErr  error
)

func jobEnv(t *testing.T) client.WithWatch {
	t.Helper()
	jobEnvOnce.Do(func() {
		root, bin, err := testenv.Paths()
		if err != nil {
			jobEnvErr = err
			return
		}
		jobEnvCP, jobEnvErr = controlplane.Start(context.Background(), controlplane.Options{
			BinDir:      bin,
			CRDDirs:     []string{filepath.Join(root, "config", "crd", "bases")},
			Controllers: []string{"garbage-collector-controller", "namespace-controller", "job-controller", "resourcequota-controller"},
		})
		if jobEnvErr != nil {
			return
		}
		scheme := runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(scheme))
		utilruntime.Must(v1alpha1.AddToScheme(scheme))
		jobEnvC, jobEnvErr = client.NewWithWatch(jobEnvCP.Config, client.Options{Scheme: scheme})
	})
	if jobEnvErr != nil {
		t.Fatalf("control plane: %v", jobEnvErr)
	}
	return jobEnvC
}

func stopJobEnv() {
	if jobEnvCP != nil {
		_ = jobEnvCP.Stop()
	}
}

func newNamespace(t *testing.T, c client.Client, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "job-", Labels: labels}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

func newStack(t *testing.T, c client.Client, ns string, rs *v1alpha1.RunnerSpec) *v1alpha1.Stack {
	t.Helper()
	s := &v1alpha1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app.prod-with-a-rather-long-name"},
		Spec: v1alpha1.StackSpec{
			Source: v1alpha1.StackSource{Git: &v1alpha1.GitSource{URL: "https://example.com/repo.git"}},
			Runner: rs,
		},
	}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeChannel stands in for opchannel.Server: the Pods never run here.
type fakeChannel struct {
	mu       sync.Mutex
	ops      map[string]opchannel.Operation
	results  map[string]chan runner.Result
	released []string
}

func (f *fakeChannel) Register(op opchannel.Operation) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops == nil {
		f.ops, f.results = map[string]opchannel.Operation{}, map[string]chan runner.Result{}
	}
	f.ops[op.ID] = op
	f.results[op.ID] = make(chan runner.Result, 1)
	return "credential-of-" + op.ID, nil
}

func (f *fakeChannel) Adopt(op opchannel.Operation, _ string) error {
	_, err := f.Register(op)
	return err
}

func (f *fakeChannel) Result(id string) <-chan runner.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.results[id]
}

func (f *fakeChannel) Unregister(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, id)
}

func (f *fakeChannel) send(id string, res runner.Result) {
	f.mu.Lock()
	ch := f.results[id]
	f.mu.Unlock()
	ch <- res
}

func jobRequest(stack *v1alpha1.Stack, id string) JobRequest {
	return JobRequest{
		Spec: runner.Spec{APIVersion: runner.APIVersion, ID: id, Type: runner.OpUp, WorkDir: ".", StackName: "dev",
			Backend: "postgres://u:p@10.0.0.1/db", Env: map[string]string{"PULUMI_CONFIG_PASSPHRASE": "very-secret-passphrase"},
			Timeout: runner.Duration(time.Minute)},
		Stack:          stack,
		ServiceAccount: "stackpilot-runner",
		Digest:         "sha256:" + strings.Repeat("ab", 32),
		TreeDir:        "/nonexistent",
	}
}

// waitFor polls until cond holds; the deadline is generous, the machine shared.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podsWithOperation(t *testing.T, c client.Client, ns, id string) []corev1.Pod {
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{LabelOperation: id}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// The Job the executor builds, with a Stack's podTemplate that asks for
// root and adds its own settings, is admitted where the restricted Pod
// Security level is enforced (a server-side dry run of its Pod), and
// neither it nor its Pod carries a secret input.
func TestRunnerPodAdmittedByRestricted(t *testing.T) {
	c := jobEnv(t)
	ns := newNamespace(t, c, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	stack := newStack(t, c, ns, &v1alpha1.RunnerSpec{
		Image:     "example.com/pulumi-nodejs:3",
		Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		PodTemplate: &v1alpha1.RunnerPodTemplate{
			Metadata: &v1alpha1.RunnerPodMetadata{Labels: map[string]string{"team": "a", LabelOperation: "forged"}},
			Spec: &v1alpha1.RunnerPodSpec{
				NodeSelector:    map[string]string{"pool": "iac"},
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(0))},
				Env:             []corev1.EnvVar{{Name: "AWS_REGION", Value: "eu-west-1"}},
			},
		},
	})
	req := jobRequest(stack, "up-20261203-080000-0123abcd")
	p := jobParams{
		Name: JobName(stack.Name, req.Spec.ID), OperationID: req.Spec.ID, OperationType: "up", Stack: stack,
		ServiceAccount: req.ServiceAccount, Image: stack.Spec.Runner.Image, RunnerImage: "127.0.0.1:5000/stackpilot-controller@sha256:" + strings.Repeat("cd", 32),
		Endpoint: "https://10.0.0.1:9444", CAPEM: []byte("ca"), Credential: "cred", Digest: req.Digest,
		ActiveDeadline: time.Hour, TerminationGrace: 30 * time.Second, TTLAfterFinished: time.Minute,
	}
	job := buildJob(p, opchannel.CredentialHash("cred"))
	if len(job.Name) > 57 {
		t.Errorf("job name %q is %d long: its Pod's name would pass 63", job.Name, len(job.Name))
	}
	if got := job.Spec.Template.Labels[LabelOperation]; got != req.Spec.ID {
		t.Errorf("the podTemplate's label overrode the operation label: %q", got)
	}
	if got := *job.Spec.Template.Spec.SecurityContext.RunAsUser; got == 0 {
		t.Errorf("the runner Pod runs as root")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-abcde", Labels: job.Spec.Template.Labels},
		Spec: job.Spec.Template.Spec}
	if err := c.Create(context.Background(), pod, client.DryRunAll); err != nil {
		t.Fatalf("the restricted level refuses the runner Pod: %v", err)
	}
	job.Namespace = ns
	if err := c.Create(context.Background(), job, client.DryRunAll); err != nil {
		t.Fatalf("the API refuses the Job: %v", err)
	}
	raw, _ := json.Marshal(job)
	for _, secret := range []string{"very-secret-passphrase", "postgres://u:p@", "cred\""} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the Job carries %q", secret)
		}
	}
}

// A result the channel receives is the operation's result, and the Job,
// its Pod and its Secret are gone afterwards.
func TestJobRunReturnsTheChannelsResultAndLeavesNothing(t *testing.T) {
	c := jobEnv(t)
	ns := newNamespace(t, c, nil)
	stack := newStack(t, c, ns, nil)
	ch := &fakeChannel{}
	j := &Job{Client: c, Channel: ch, Endpoint: "https://10.0.0.1:9444", CAPEM: []byte("ca"), RunnerImage: "runner:1"}
	req := jobRequest(stack, "up-20261203-080000-00000001")

	go func() {
		// The Job controller creates the Pod; the "runner" then reports.
		waitFor(t, "the runner Pod", func() bool { return len(podsWithOperation(t, c, ns, req.Spec.ID)) == 1 })
		var secret corev1.Secret
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: CredentialSecretName(JobName(stack.Name, req.Spec.ID))}, &secret); err != nil {
			t.Errorf("per-operation Secret: %v", err)
		} else if string(secret.Data[CredentialKey]) != "credential-of-"+req.Spec.ID || len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].Kind != "Job" {
			t.Errorf("per-operation Secret: credential %q, owners %+v", secret.Data[CredentialKey], secret.OwnerReferences)
		}
		ch.send(req.Spec.ID, runner.Result{APIVersion: runner.APIVersion, ID: req.Spec.ID, Outcome: runner.OutcomeSucceeded})
	}()
	res, err := j.Run(context.Background(), req)
	if err != nil || res.Outcome != runner.OutcomeSucceeded {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	waitFor(t, "the Job, its Pod and its Secret to go", func() bool {
		var jobs batchv1.JobList
		var secrets corev1.SecretList
		_ = c.List(context.Background(), &jobs, client.InNamespace(ns))
		_ = c.List(context.Background(), &secrets, client.InNamespace(ns), client.MatchingLabels{LabelOperation: req.Spec.ID})
		return len(jobs.Items) == 0 && len(secrets.Items) == 0 && len(podsWithOperation(t, c, ns, req.Spec.ID)) == 0
	})
	if len(ch.released) != 1 {
		t.Errorf("the operation was not unregistered from the channel: %v", ch.released)
	}
}

// A namespace whose quota allows no Pod fails the operation with the
// quota's own words, not with a wait until the operation's timeout.
func TestJobRefusedByQuotaFailsClearly(t *testing.T) {
	c := jobEnv(t)
	ns := newNamespace(t, c, nil)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "none"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if err := c.Create(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	stack := newStack(t, c, ns, nil)
	j := &Job{Client: c, Channel: &fakeChannel{}, Endpoint: "https://10.0.0.1:9444", RunnerImage: "runner:1"}
	_, err := j.Run(context.Background(), jobRequest(stack, "up-20261203-080000-00000002"))
	var podErr *PodError
	if !errors.As(err, &podErr) || podErr.Reason != "QuotaExceeded" || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("Run: %v, want a QuotaExceeded PodError", err)
	}
}

// An image that cannot be pulled fails the operation with its name; a Pod
// that vanished mid-run is an operation without a result.
func TestPodStatesEndTheWait(t *testing.T) {
	c := jobEnv(t)
	ns := newNamespace(t, c, nil)
	stack := newStack(t, c, ns, &v1alpha1.RunnerSpec{Image: "registry.invalid/nothing:1"})
	j := &Job{Client: c, Channel: &fakeChannel{}, Endpoint: "https://10.0.0.1:9444", RunnerImage: "runner:1"}

	t.Run("image pull", func(t *testing.T) {
		req := jobRequest(stack, "up-20261203-080000-00000003")
		go func() {
			waitFor(t, "the runner Pod", func() bool { return len(podsWithOperation(t, c, ns, req.Spec.ID)) == 1 })
			pod := podsWithOperation(t, c, ns, req.Spec.ID)[0]
			pod.Status.Phase = corev1.PodPending
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerContainer, Image: "registry.invalid/nothing:1",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
			if err := c.Status().Update(context.Background(), &pod); err != nil {
				t.Error(err)
			}
		}()
		_, err := j.Run(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "RunnerPodFailed: ImagePullBackOff for registry.invalid/nothing:1") {
			t.Fatalf("Run: %v", err)
		}
	})
	t.Run("pending past its deadline", func(t *testing.T) {
		// No scheduler runs here: the test writes what one writes for a
		// Pod no node can take, and the Pod stays Pending.
		pending := &Job{Client: c, Channel: &fakeChannel{}, Endpoint: "https://10.0.0.1:9444", RunnerImage: "runner:1", PendingTimeout: 2 * time.Second}
		req := jobRequest(stack, "up-20261203-080000-00000005")
		go func() {
			waitFor(t, "the runner Pod", func() bool { return len(podsWithOperation(t, c, ns, req.Spec.ID)) == 1 })
			pod := podsWithOperation(t, c, ns, req.Spec.ID)[0]
			pod.Status.Phase = corev1.PodPending
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}}
			if err := c.Status().Update(context.Background(), &pod); err != nil {
				t.Error(err)
			}
		}()
		_, err := pending.Run(context.Background(), req)
		var podErr *PodError
		if !errors.As(err, &podErr) || podErr.Reason != "Unschedulable" ||
			!strings.Contains(err.Error(), "still pending after 2s: 0/1 nodes are available: 1 node(s) didn't match") {
			t.Fatalf("Run: %v, want RunnerPodFailed: Unschedulable with the scheduler's message", err)
		}
		waitFor(t, "the pending Job to go", func() bool {
			var jobs batchv1.JobList
			_ = c.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{LabelOperation: req.Spec.ID})
			return len(jobs.Items) == 0
		})
	})
	t.Run("pod deleted", func(t *testing.T) {
		req := jobRequest(stack, "up-20261203-080000-00000004")
		go func() {
			waitFor(t, "the runner Pod", func() bool { return len(podsWithOperation(t, c, ns, req.Spec.ID)) == 1 })
			pod := podsWithOperation(t, c, ns, req.Spec.ID)[0]
			if err := c.Delete(context.Background(), &pod, client.GracePeriodSeconds(0)); err != nil {
				t.Error(err)
			}
		}()
		_, err := j.Run(context.Background(), req)
		var re *RunnerError
		if !errors.As(err, &re) || !errors.Is(err, ErrPodGone) {
			t.Fatalf("Run: %v, want a RunnerError for a Pod gone", err)
		}
	})
}

// A runner that reports a cancelled operation the controller did not
// cancel was stopped by others (its Pod deleted, evicted, drained): the
// operation is interrupted, and runs again.
func TestCancelledByOthersIsInterrupted(t *testing.T) {
	c := jobEnv(t)
	ns := newNamespace(t, c, nil)
	stack := newStack(t, c, ns, nil)
	ch := &fakeChannel{}
	j := &Job{Client: c, Channel: ch, Endpoint: "https://10.0.0.1:9444", RunnerImage: "runner:1"}
	req := jobRequest(stack, "up-20261203-080000-00000005")
	go func() {
		waitFor(t, "the runner Pod", func() bool { return len(podsWithOperation(t, c, ns, req.Spec.ID)) == 1 })
		ch.send(req.Spec.ID, runner.Result{APIVersion: runner.APIVersion, ID: req.Spec.ID, Outcome: runner.OutcomeCancelled, Message: "terminated"})
	}()
	res, err := j.Run(context.Background(), req)
	if err != nil || res.Outcome != OutcomeInterrupted || !strings.Contains(res.Message, "runner Pod was stopped") {
		t.Fatalf("Run: %+v, %v; want an interrupted result", res, err)
	}
}

func ptrTo[T any](v T) *T { return &v }
