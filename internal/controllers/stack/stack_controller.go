package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fluxcd/pkg/runtime/patch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/logstore"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// Executor runs one operation to its result (internal/executor.Local in process mode).
type Executor interface {
	Run(ctx context.Context, spec runner.Spec) (runner.Result, error)
}

// StackReconciler keeps each Stack's infrastructure equal to its program.
// It embeds the Config it was made with (new.go), so what a caller chooses
// is read as r.DefaultBackend, r.Sources, ... and never copied by hand.
type StackReconciler struct {
	Config
	client.Client
	// APIReader reads Secrets and ConfigMaps straight from the API server, so the
	// controller caches no Secret data (it watches their metadata only).
	APIReader client.Reader
	// EventRecorder writes core/v1 Events, which carry annotations (the
	// revision, as Flux's controllers annotate theirs) where events.k8s.io
	// Events cannot.
	EventRecorder record.EventRecorder
	Artifacts     *artifact.Store
	// Logs keeps the engine logs of each Stack's recent operations; nil
	// keeps none.
	Logs *logstore.Store
	// WorkDir holds one work tree per operation (artifact.LinkTree): on the
	// artifacts' file system, files are hard links, not copies.
	WorkDir string
	// OutcomesDir keeps the final status of an operation until the patch
	// that carries it lands (outcome_store.go); "" keeps none.
	OutcomesDir string
	// InputsDir keeps the last applied inputs of each Stack with
	// spec.rollback, encrypted (inputs.Snapshots); "" keeps none.
	InputsDir string
	// PulumiHome is shared by every operation so plugins are installed once.
	PulumiHome string
	// DigestKey keys the HMAC of the inputs digest (inputs.DigestKey).
	DigestKey *DigestKey
	// Host is this controller's host name (in a Pod, the Pod's name), recorded
	// with each operation so that its lock can be told apart from others'.
	Host string
	// Plans keeps the plans that wait for approval.
	Plans *plan.Store
	// Reviews keeps the plans pull requests' previews saved
	// (preview_run.go), which the up after a merge applies (reviewed.go).
	Reviews *plan.Store

	inflight   inflightOps
	driftRanks driftRankings
}

// stepFunc is one step of a reconcile. Whether it runs is the route's choice
// (route.go), never its own. It records what it finds in the reconcile's
// state (findings, for Ready: summarize.go) and sets only the conditions of
// its own concern (OutputsPublished, Drifted, PlanPending); Ready,
// Reconciling and Stalled are summarize.go's alone.
type stepFunc func(ctx context.Context, st *reconcileState) (stepResult, error)

type stepResult int

const (
	stepContinue stepResult = iota // go on to the next step
	stepDone                       // the reconcile is complete; requeue at the interval
)

// reconcileState carries what earlier steps found to later ones.
type reconcileState struct {
	stack *v1alpha1.Stack
	// policy is what the operation starting now enforces (policies.go);
	// nil when no policy selects the Stack, or for another operation type.
	// policyDigest is that of the selecting policies, "" when none does
	// (status.policy.digest: a change retries what they stopped).
	policy *runner.PolicySpec
	// policyPacks are spec.policyPacks of the operation starting, fetched
	// into its tree (withPolicyPacks), their Dir relative to the tree.
	policyPacks  []runner.PolicyPack
	policyDigest string
	// policyDropped: this operation found no policy selecting the Stack,
	// where the one before had some (its PolicyReport goes).
	policyDropped bool
	patcher       *patch.SerialPatcher
	// patchClient is the patcher's client (freshReads after refresh); nil
	// is the reconciler's.
	patchClient client.Client
	revision    string // resolved source revision, Flux format
	// fetch brings the resolved revision into the artifact cache; set by
	// resolveSource for the Stack's source kind, called by ensureArtifact.
	fetch    func(ctx context.Context) (artifact.Artifact, error)
	artifact artifact.Artifact // fetched when needed (ensureArtifact)
	// programDigest is the digest of the program's paths at revision.
	programDigest string
	inputs        *inputs
	decision      decision
	// requeueAfter overrides the interval for the next reconcile when set.
	requeueAfter time.Duration
	// result is the outcome of this reconcile's up, when one ran and succeeded.
	result *runner.Result
	// recovered is the interrupted operation found at the start, if any.
	recovered *v1alpha1.OperationRecord
	// operationStarted is set once an operation's start is recorded in status.
	operationStarted bool
	// lastStarted is the id of the last operation whose start is in status.
	lastStarted string
	// drain is the context of the steps after an operation that ended
	// during a shutdown (stepContext); drainCancel releases it.
	drain       context.Context
	drainCancel context.CancelFunc
	// approved is the approved plan runUp applies (gateApproval).
	approved *approvedPlan
	// reviewed is the plan of a pull request's review an Auto up applies
	// (reviewed.go).
	reviewed *approvedPlan
	// drift is what this reconcile's drift check found, for remediateDrift.
	drift *driftFound
	// adoptable is an operation a stopped controller left running in its
	// Job, to be followed rather than run again (adopt_job.go).
	adoptable *v1alpha1.OperationRecord
	// findings are what the steps found about readiness and summarize.go
	// has not written into the conditions yet (summarize.go).
	findings []finding
}

// Reconcile is the entry point of controller-runtime.
func (r *StackReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	stack := &v1alpha1.Stack{}
	if err := r.Get(ctx, req.NamespacedName, stack); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without our finalizer (someone removed it): its series go too.
			forgetStackMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.inflight.forgetSeen(stack)
	st := &reconcileState{stack: stack, patcher: patch.NewSerialPatcher(stack, r.Client)}
	if r.Shard != nil {
		st.patchClient = cacheOrAPI{Client: r.Client, reader: r.APIReader}
		st.patcher = patch.NewSerialPatcher(stack, st.patchClient)
	}

	defer func() {
		result, retErr = r.summarize(ctx, st, retErr)
		st.endDrain()
	}()

	if !stack.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, st)
	}
	if !controllerutil.ContainsFinalizer(stack, v1alpha1.StackFinalizer) {
		controllerutil.AddFinalizer(stack, v1alpha1.StackFinalizer)
		// Persist the finalizer before anything can be created.
		if err := st.patcher.Patch(ctx, stack); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The observe steps find what the status, the source and the inputs say,
	// and decide what to do; act then runs the steps of that action
	// (route.go). The result is summarize's.
	defer r.awaitAdoptable(ctx, st) // a Job the route did not come to
	return ctrl.Result{}, r.runSteps(ctx, st, []stepFunc{
		// Recovery comes before the suspend: an operation a dead controller
		// left running would otherwise stay "running" for as long as the
		// Stack is suspended (Ready Unknown, dependents waiting on it).
		r.recoverInterrupted,
		r.unlessSuspended,
		r.resolveSource,
		r.checkDependencies,
		r.resolveInputs,
		r.resolveProgram,
		r.decide,
		r.act,
	})
}

// unlessSuspended ends the reconcile of a suspended Stack (summarize says so).
func (r *StackReconciler) unlessSuspended(ctx context.Context, st *reconcileState) (stepResult, error) {
	if st.stack.Spec.Suspend {
		log.FromContext(ctx).V(1).Info("suspended")
		return stepDone, nil
	}
	return stepContinue, nil
}

// runSteps runs the steps in order until one is done or fails. The steps
// after an operation that ended during a shutdown run on stepContext's
// context; one of them that would start another operation ends the
// reconcile without an error: the next controller decides again.
func (r *StackReconciler) runSteps(ctx context.Context, st *reconcileState, steps []stepFunc) error {
	for _, step := range steps {
		res, err := step(st.stepContext(ctx), st)
		if err != nil {
			if st.operationStarted && errors.Is(err, ErrShuttingDown) {
				break
			}
			if st.operationStarted && errors.Is(err, errReleased) {
				break // what ran here is recorded; nothing more starts (shard.go)
			}
			return err
		}
		if res == stepDone {
			break
		}
	}
	return nil
}

// rebase makes obj the base of the next status patch: it then writes what
// differs from obj, which is what the API server may hold.
func (st *reconcileState) rebase(r *StackReconciler, obj *v1alpha1.Stack) {
	c := st.patchClient
	if c == nil {
		c = r.Client
	}
	st.patcher = patch.NewSerialPatcher(obj, c)
}

func scrubMsg(st *reconcileState, msg string) string {
	if st.inputs == nil {
		return msg
	}
	return scrub(msg, st.inputs.Secrets)
}

// event records a Kubernetes event about a Stack. Every event goes through
// here, so that its note is always within the API server's limit (eventNote).
func (r *StackReconciler) event(stack *v1alpha1.Stack, eventType, reason, action, note string) {
	if r.EventRecorder == nil {
		return
	}
	annotations := map[string]string{v1alpha1.GroupVersion.Group + "/operation": action}
	if rev := eventRevision(stack); rev != "" {
		annotations[RevisionAnnotation] = rev
	}
	r.EventRecorder.AnnotatedEventf(stack, annotations, eventType, reason, "%s", eventNote(note))
}

// RevisionAnnotation is the event annotation with the source revision the
// event is about, "<api group>/revision" as Flux's controllers write it, so
// that Flux's notification-controller (and the Alerts of this project) can
// say which revision failed or was applied.
const RevisionAnnotation = "stackpilot.dev/revision"

// eventRevision is the revision of the newest operation (or skip) in the
// history, else the applied one.
func eventRevision(stack *v1alpha1.Stack) string {
	if h := stack.Status.History; len(h) > 0 && h[0].Revision != "" {
		return h[0].Revision
	}
	if stack.Status.LastAttemptedRevision != "" {
		return stack.Status.LastAttemptedRevision
	}
	return stack.Status.LastAppliedRevision
}

// maxEventNote is the API server's limit on an event's note, in bytes: it
// rejects a longer one, and the recorder drops the event without a word.
const maxEventNote = 1024

// eventNote keeps a note within maxEventNote. A longer one (an operation
// failure with Pulumi's diagnostics) is cut to its first line, which names the
// operation and the first diagnostic, and points to the status for the rest.
func eventNote(note string) string {
	if len(note) <= maxEventNote {
		return note
	}
	const more = " (see the Stack's status for the rest)"
	first, _, _ := strings.Cut(note, "\n")
	first = strings.TrimSpace(first)
	if len(first)+len(more) > maxEventNote {
		first = cutUTF8(first, maxEventNote-len(more)-len("…")) + "…"
	}
	return first + more
}

// cutUTF8 is the longest prefix of s of at most n bytes that does not split a
// UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (r *StackReconciler) recordf(stack *v1alpha1.Stack, eventType, reason, action, format string, args ...any) {
	r.event(stack, eventType, reason, action, fmt.Sprintf(format, args...))
}
