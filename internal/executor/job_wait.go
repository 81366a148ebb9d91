package executor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// recheckEvery bounds how long a change of the Pod can go unseen when the
// watch is slow or broken: the watch is a shortcut, the list is the truth.
const recheckEvery = 5 * time.Second

// wait follows the operation's Pod until its result arrives, the Pod fails
// in a way that means no result will, or the operation must be stopped.
func (j *Job) wait(ctx context.Context, spec runner.Spec, job *batchv1.Job, cancelOnStop bool) (runner.Result, error) {
	results := j.Channel.Result(spec.ID)
	changed := j.watchPods(ctx, job)
	tick := time.NewTicker(recheckEvery)
	defer tick.Stop()
	var deadline <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(time.Duration(spec.Timeout) + j.killGrace())
		defer t.Stop()
		deadline = t.C
	}
	f := podFollower{created: time.Now(), pendingTimeout: j.pendingTimeout(), image: job.Annotations[AnnotationImage]}
	for {
		select {
		case res := <-results:
			return stoppedByOthers(res), nil
		case <-ctx.Done():
			// The controller is stopping (it sets no other end to an
			// operation's context): the Pod is not its process, and goes
			// on, unless it is one the caller would rather run again.
			if cancelOnStop {
				return j.stop(spec, job, results, ReasonCancelled, ctx.Err())
			}
			return runner.Result{}, ErrDetached
		case <-deadline:
			return j.stop(spec, job, results, ReasonTimeout, ErrTimeout)
		case <-changed:
		case <-tick.C:
		}
		pods, err := j.podsOf(ctx, job)
		if err != nil {
			continue // the API server is busy or gone for a moment; the tick retries
		}
		v := f.observe(pods, time.Now())
		if v.podErr == nil && !v.ended && f.neverStarted(time.Now()) {
			v.podErr = j.creationFailure(ctx, job)
		}
		switch {
		case v.podErr != nil:
			return runner.Result{}, v.podErr
		case v.ended:
			// The runner reports before it exits; give the report a moment
			// to land before calling the Pod's end a death.
			select {
			case res := <-results:
				return res, nil
			case <-time.After(resultAfterExit):
			case <-ctx.Done():
			}
			return runner.Result{}, &RunnerError{ID: spec.ID, Reason: ReasonExited, ExitCode: v.exitCode,
				Stderr: runner.Redact(spec, v.detail), Err: ErrPodGone}
		}
	}
}

// stoppedByOthers: a runner that reports a cancelled operation the
// controller did not cancel was stopped by someone else: its Pod was
// deleted or evicted, or its node drained. The operation was interrupted,
// not cancelled: it runs again, and its lock, if Pulumi left one, may be
// cleared once the Pod is gone.
func stoppedByOthers(res runner.Result) runner.Result {
	if res.Outcome != runner.OutcomeCancelled {
		return res
	}
	res.Outcome = OutcomeInterrupted
	res.Message = "the runner Pod was stopped (deleted, evicted or its node drained) while the operation ran: " + res.Message
	return res
}

// OutcomeInterrupted is the outcome of an operation whose runner was
// stopped by something other than the controller (v1alpha1.OutcomeInterrupted).
const OutcomeInterrupted runner.Outcome = "interrupted"

// stop asks the runner to cancel: deleting its Pod sends it SIGTERM, and
// the Pod's grace period gives Pulumi the time to finish the steps in
// flight, write its checkpoint and release the lock; the runner then
// reports a cancelled result. Without one in time, the operation has none.
func (j *Job) stop(spec runner.Spec, job *batchv1.Job, results <-chan runner.Result, reason string, cause error) (runner.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), j.cancelGrace()+resultAfterExit)
	defer cancel()
	pods, _ := j.podsOf(ctx, job)
	for i := range pods {
		_ = j.Client.Delete(ctx, &pods[i]) // with the Pod's own grace period
	}
	select {
	case res := <-results:
		return res, nil
	case <-ctx.Done():
	}
	return runner.Result{}, &RunnerError{ID: spec.ID, Reason: reason, ExitCode: -1, Err: cause}
}

// watchPods signals each change of the operation's Pods. It ends with ctx;
// a watch the API server closes is opened again.
func (j *Job) watchPods(ctx context.Context, job *batchv1.Job) <-chan struct{} {
	changed := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			w, err := j.Client.Watch(ctx, &corev1.PodList{}, client.InNamespace(job.Namespace),
				client.MatchingLabels{LabelOperation: job.Labels[LabelOperation]})
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(recheckEvery):
				}
				continue
			}
			for range w.ResultChan() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
			w.Stop()
		}
	}()
	return changed
}

// podFollower judges the operation's Pod from what the API shows of it.
type podFollower struct {
	created        time.Time
	pendingTimeout time.Duration
	image          string
	seen           bool // a Pod existed once
}

// podVerdict: podErr when the Pod cannot run the operation; ended when it
// ran and is gone or finished (then the result decides, or its absence).
type podVerdict struct {
	podErr   *PodError
	ended    bool
	exitCode int
	detail   string
}

// pullFailures are the waiting reasons that mean the image will not come.
var pullFailures = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"ErrImageNeverPull": true, "CreateContainerConfigError": true, "CreateContainerError": true,
}

func (f *podFollower) neverStarted(now time.Time) bool {
	return !f.seen && now.Sub(f.created) > 10*time.Second
}

func (f *podFollower) observe(pods []corev1.Pod, now time.Time) podVerdict {
	if len(pods) == 0 {
		if f.seen {
			return podVerdict{ended: true, exitCode: -1, detail: "the runner Pod was deleted"}
		}
		if now.Sub(f.created) > f.pendingTimeout {
			return podVerdict{podErr: &PodError{Reason: "PodNotCreated", Message: fmt.Sprintf("no runner Pod was created in %s", f.pendingTimeout)}}
		}
		return podVerdict{}
	}
	f.seen = true
	sort.Slice(pods, func(a, b int) bool { return pods[a].CreationTimestamp.Before(&pods[b].CreationTimestamp) })
	pod := pods[len(pods)-1]
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && pullFailures[w.Reason] {
			return podVerdict{podErr: &PodError{Reason: w.Reason, Image: cs.Image, Message: firstLine(w.Message)}}
		}
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return podVerdict{ended: true, exitCode: exitCode(pod), detail: podEnd(pod)}
	case corev1.PodPending:
		if now.Sub(pod.CreationTimestamp.Time) > f.pendingTimeout {
			return podVerdict{podErr: &PodError{Reason: pendingReason(pod), Image: f.image,
				Message: fmt.Sprintf("the runner Pod %s was still pending after %s: %s", pod.Name, f.pendingTimeout, pendingMessage(pod))}}
		}
	}
	return podVerdict{}
}

func exitCode(pod corev1.Pod) int {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && cs.Name == runnerContainer {
			return int(t.ExitCode)
		}
	}
	return -1
}

// podEnd says how the Pod ended: its reason (Evicted, DeadlineExceeded,
// OOMKilled...) and the end of what the runner printed.
func podEnd(pod corev1.Pod) string {
	parts := []string{}
	if pod.Status.Reason != "" {
		parts = append(parts, pod.Status.Reason+": "+pod.Status.Message)
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || t.Reason == "OOMKilled") {
			parts = append(parts, fmt.Sprintf("container %s: %s (exit code %d) %s", cs.Name, t.Reason, t.ExitCode, strings.TrimSpace(t.Message)))
		}
	}
	return strings.Join(parts, "; ")
}

func pendingReason(pod corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return c.Reason // Unschedulable
		}
	}
	return "PodPending"
}

func pendingMessage(pod corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return cs.Name + ": " + w.Reason + " " + firstLine(w.Message)
		}
	}
	return "no reason given"
}

// creationFailure reads why the Job controller could not create the Pod
// (a ResourceQuota or a LimitRange refused it, the ServiceAccount is
// missing): its FailedCreate events.
func (j *Job) creationFailure(ctx context.Context, job *batchv1.Job) *PodError {
	var events corev1.EventList
	if err := j.Client.List(ctx, &events, client.InNamespace(job.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.uid", string(job.UID))}); err != nil {
		return nil
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == job.UID && e.Reason == "FailedCreate" {
			reason := "FailedCreate"
			if strings.Contains(e.Message, "exceeded quota") {
				reason = "QuotaExceeded"
			}
			return &PodError{Reason: reason, Message: firstLine(e.Message)}
		}
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
