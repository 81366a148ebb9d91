package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// PreviewReconciler previews the open pull requests of Stacks with
// spec.previews (preview_run.go) and posts what each would do back to the
// pull request. It is a controller of its own beside the StackReconciler,
// with its own queue and workers (--concurrent-previews), so that a
// preview never holds up a Stack's own reconcile, and it shares the Stack
// reconciler's ways of running an operation. It writes only
// status.previews and the preview request annotations.
type PreviewReconciler struct {
	*StackReconciler
	// HTTPClient reaches the forges; nil is a client with a 30 s timeout.
	HTTPClient *http.Client
	// PlanURLTemplate makes the link to a reviewed plan in the comment
	// (--preview-plan-url-template); "" links none and names the command.
	PlanURLTemplate string
	// Now is the clock (tests).
	Now func() time.Time

	running runningPreviews
	// polled is when each Stack's pull requests were last listed.
	polled sync.Map // types.UID -> time.Time
}

// PreviewOptions are the preview controller's settings.
type PreviewOptions struct {
	// MaxConcurrentReconciles bounds the previews that run at once.
	MaxConcurrentReconciles int
}

// SetupWithManager registers the preview controller: a Stack is reconciled
// when its preview requests or spec change; a request for a newer head of a
// pull request whose preview runs cancels that preview first.
func (r *PreviewReconciler) SetupWithManager(mgr ctrl.Manager, opts PreviewOptions) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("stackpreview").
		Watches(&v1alpha1.Stack{}, previewEvents{running: &r.running, gone: func(uid types.UID) { r.polled.Delete(uid) }}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)}).
		Complete(r)
}

// Reconcile handles every preview request of one Stack, in order of pull
// request number.
func (r *PreviewReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read through the API server, not the cache: the previews this
	// controller recorded a moment ago must be seen, or a request that
	// arrived meanwhile would preview the same head again.
	stack := &v1alpha1.Stack{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, stack); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !stack.DeletionTimestamp.IsZero() {
		// The Stack goes: so do its review stacks, then the finalizer
		// that kept it for them.
		for _, e := range stack.Status.Previews {
			if err := r.forget(ctx, stack, v1alpha1.PreviewRequest{Number: e.Number, Closed: true}); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.dropFinalizer(ctx, stack)
	}
	if stack.Spec.Suspend {
		// Suspended, a Stack runs nothing, previews included: the requests
		// wait for spec.suspend to go (a change of generation).
		return ctrl.Result{}, nil
	}
	if q, pending := revisionPending(stack); pending {
		if err := r.previewRevision(ctx, stack, q); err != nil {
			return ctrl.Result{}, err
		}
	}
	reqs, bad := previewRequests(stack)
	if err := r.removeAnnotations(ctx, stack, bad); err != nil {
		return ctrl.Result{}, err
	}
	p := stack.Spec.Previews
	if p == nil || !p.Enabled {
		// Turned off: what it kept goes (review stacks too), nothing is
		// posted.
		numbers := map[int64]bool{}
		for _, q := range reqs {
			numbers[q.Number] = true
		}
		for _, e := range stack.Status.Previews {
			numbers[e.Number] = true
		}
		for n := range numbers {
			if err := r.forget(ctx, stack, v1alpha1.PreviewRequest{Number: n, Closed: true}); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, nil
	}
	var requeue time.Duration
	if p.PollInterval != nil && p.PollInterval.Duration > 0 {
		polled, err := r.poll(ctx, stack, reqs)
		if err != nil {
			log.FromContext(ctx).Info("could not list the open pull requests", "error", err.Error())
		} else {
			reqs = polled
		}
		requeue = p.PollInterval.Duration
	}
	label := forkLabelOf(p)
	for _, q := range reqs {
		if ctx.Err() != nil {
			return ctrl.Result{}, ctx.Err()
		}
		if q.Closed {
			if err := r.forget(ctx, stack, q); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		e := previewEntry(stack, q.Number)
		if previewDone(e, q, label) {
			continue
		}
		if e != nil && e.Phase == v1alpha1.PreviewError && sameHead(e.Head, q.Head) {
			if wait := time.Until(e.UpdatedAt.Add(backoff(e.Failures, time.Minute, time.Hour))); wait > 0 {
				requeue = minPositive(requeue, wait)
				continue
			}
		}
		next, err := r.previewOne(ctx, stack, q)
		if err != nil {
			return ctrl.Result{}, err
		}
		if next.Phase == v1alpha1.PreviewError {
			requeue = minPositive(requeue, backoff(next.Failures, time.Minute, time.Hour))
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// forget ends what a closed pull request left: its status entry, its
// reviewed plan unless it was merged, and its request annotation (a preview running for it was cancelled by the
// request's change). Its comment and statuses stay on the forge, as a
// record of what was reviewed.
func (r *PreviewReconciler) forget(ctx context.Context, stack *v1alpha1.Stack, q v1alpha1.PreviewRequest) error {
	if e := previewEntry(stack, q.Number); e != nil {
		if rs := e.ReviewStack; rs != nil && rs.Phase != v1alpha1.PreviewSkipped {
			if err := r.destroyReviewStack(ctx, stack, q.Number); err != nil {
				// Kept, with its request: retried with the queue's backoff.
				r.recordf(stack, corev1.EventTypeWarning, "ReviewStackDestroyFailed", "preview", "pull request %d: %v", q.Number, err)
				return err
			}
		}
		if e.Plan != "" && !q.Merged {
			// Merged, the plan stays for the up the merge starts
			// (reviewed.go), which ends it; closed, nobody applies it.
			_ = r.Reviews.Remove(stack.UID, e.Plan)
		}
		before := stack.DeepCopy()
		dropPreviewEntry(stack, q.Number)
		if err := r.Status().Patch(ctx, stack, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("drop the preview of pull request %d from status: %w", q.Number, err)
		}
	}
	if err := r.removeAnnotations(ctx, stack, []string{previewAnnotation(q.Number)}); err != nil {
		return err
	}
	return r.dropFinalizer(ctx, stack)
}

// removeAnnotations removes keys from stack's annotations, when present.
func (r *PreviewReconciler) removeAnnotations(ctx context.Context, stack *v1alpha1.Stack, keys []string) error {
	var present []string
	for _, k := range keys {
		if _, ok := stack.Annotations[k]; ok {
			present = append(present, k)
		}
	}
	if len(present) == 0 {
		return nil
	}
	remove := map[string]any{}
	for _, k := range present {
		remove[k] = nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": remove}})
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, stack, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("remove the preview requests %v: %w", present, err)
	}
	return nil
}

// patchPreview writes e into status.previews (only this controller writes
// that list, one reconcile per Stack at a time, so a merge patch of the
// whole list loses nobody's entry).
func (r *PreviewReconciler) patchPreview(ctx context.Context, stack *v1alpha1.Stack, e v1alpha1.PullRequestPreview) error {
	if e.Phase != v1alpha1.PreviewRunning {
		pullRequestPreviews.WithLabelValues(string(e.Phase)).Inc()
	}
	before := stack.DeepCopy()
	setPreviewEntry(stack, e)
	if err := r.Status().Patch(ctx, stack, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("record the preview of pull request %d: %w", e.Number, err)
	}
	return nil
}

// runningPreviews are the previews running now, by Stack and pull request
// (number 0: the revision asked for on demand, its head the request's time),
// so that a request for a newer head (or a closed pull request) cancels the
// preview of the older one at once rather than after it ends.
type runningPreviews struct {
	mu sync.Mutex
	m  map[previewKey]runningPreview
}

type previewKey struct {
	uid    types.UID
	number int64
}

type runningPreview struct {
	head   string
	cancel context.CancelFunc
}

func (rp *runningPreviews) start(k previewKey, head string, cancel context.CancelFunc) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.m == nil {
		rp.m = map[previewKey]runningPreview{}
	}
	rp.m[k] = runningPreview{head: head, cancel: cancel}
}

func (rp *runningPreviews) end(k previewKey) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	delete(rp.m, k)
}

// cancelOutdated cancels the running previews of stack whose request now
// names another head, or a closed pull request, and returns how many.
func (rp *runningPreviews) cancelOutdated(stack *v1alpha1.Stack) int {
	reqs, _ := previewRequests(stack)
	want := map[int64]v1alpha1.PreviewRequest{}
	for _, q := range reqs {
		want[q.Number] = q
	}
	rev, _ := revisionRequest(stack)
	rp.mu.Lock()
	defer rp.mu.Unlock()
	n := 0
	for k, run := range rp.m {
		if k.uid != stack.UID {
			continue
		}
		if k.number == 0 { // the revision asked for on demand
			if rev.RequestedAt != run.head {
				run.cancel()
				n++
			}
			continue
		}
		q, ok := want[k.number]
		if !ok || q.Closed || !sameHead(q.Head, run.head) || stack.Spec.Previews == nil || !stack.Spec.Previews.Enabled {
			run.cancel()
			n++
		}
	}
	return n
}

// previewEvents enqueues a Stack whose preview requests or spec changed,
// and cancels its outdated previews before that.
type previewEvents struct {
	running *runningPreviews
	// gone forgets what is kept in memory of a deleted Stack.
	gone func(types.UID)
}

var _ handler.TypedEventHandler[client.Object, reconcile.Request] = previewEvents{}

func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
	q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
}

func (h previewEvents) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if s, ok := e.Object.(*v1alpha1.Stack); ok && wantsPreviews(s) {
		enqueue(q, s)
	}
}

func (h previewEvents) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	old, ok1 := e.ObjectOld.(*v1alpha1.Stack)
	s, ok2 := e.ObjectNew.(*v1alpha1.Stack)
	if !ok1 || !ok2 {
		return
	}
	if old.Generation == s.Generation && samePreviewAnnotations(old, s) && old.DeletionTimestamp.Equal(s.DeletionTimestamp) {
		return
	}
	h.running.cancelOutdated(s)
	if wantsPreviews(s) || wantsPreviews(old) {
		enqueue(q, s)
	}
}

func (h previewEvents) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if s, ok := e.Object.(*v1alpha1.Stack); ok {
		gone := s.DeepCopy()
		gone.Annotations = nil
		h.running.cancelOutdated(gone)
		if h.gone != nil {
			h.gone(s.UID)
		}
	}
}

func (h previewEvents) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueue(q, e.Object)
}

// wantsPreviews: the Stack has previews on, preview requests, or previews
// to clean up.
func wantsPreviews(s *v1alpha1.Stack) bool {
	if (s.Spec.Previews != nil && s.Spec.Previews.Enabled) || controllerutil.ContainsFinalizer(s, v1alpha1.ReviewStackFinalizer) {
		return true
	}
	reqs, bad := previewRequests(s)
	_, rev := revisionRequest(s)
	return rev || len(reqs) > 0 || len(bad) > 0 || len(s.Status.Previews) > 0
}

func samePreviewAnnotations(a, b *v1alpha1.Stack) bool {
	ra, ba := previewRequests(a)
	rb, bb := previewRequests(b)
	ja, _ := json.Marshal([]any{ra, ba, a.Annotations[v1alpha1.RevisionPreviewAnnotation]})
	jb, _ := json.Marshal([]any{rb, bb, b.Annotations[v1alpha1.RevisionPreviewAnnotation]})
	return string(ja) == string(jb)
}
