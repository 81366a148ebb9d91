package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// runUp runs `pulumi up` for the resolved revision and inputs and records
// it; what follows its end, success or failure, is in hooks.go.
func (r *StackReconciler) runUp(ctx context.Context, st *reconcileState) (stepResult, error) {
	res, err := r.operateWith(ctx, st, runner.OpUp, st.artifact, st.revision, st.upOptions())
	if errors.Is(err, errReleased) {
		return stepDone, err // no up ran: nothing failed (shard.go)
	}
	if err != nil {
		r.upFailed(st, err)
		return stepDone, err
	}
	ctx = st.stepContext(ctx) // the up may have ended during a shutdown: what follows must land
	stack := st.stack
	stack.Status.LastAppliedRevision = st.revision
	stack.Status.LastAppliedProgramDigest = st.programDigest
	stack.Status.InputsDigest = st.inputs.Digest
	stack.Status.LastAppliedArtifact = &v1alpha1.ArtifactReference{Revision: st.revision, Digest: st.artifact.Digest}
	stack.Status.AppliedStack = currentStack(stack, st.inputs)
	stack.Status.Outputs, stack.Status.OutputsOmitted = statusOutputs(res.Outputs, stack.Spec.Outputs)
	st.result = res
	st.found(finding{kind: foundApplied, message: "Applied revision " + st.revision})
	r.upSucceeded(ctx, st, res)
	return stepContinue, nil
}

// operate runs one operation through the executor: it records the operation as
// running in status first (so a crash leaves a trace), then the result.
func (r *StackReconciler) operate(ctx context.Context, st *reconcileState, typ runner.OperationType, art artifact.Artifact, revision string) (*runner.Result, error) {
	return r.operateWith(ctx, st, typ, art, revision, opOptions{})
}

// opOptions are what an operation adds to the Stack's spec.
type opOptions struct {
	// record is the type in the history when it is not the runner's (a
	// remediate is a runner up).
	record v1alpha1.OperationType
	// refresh refreshes first, whatever spec.refresh says.
	refresh bool
	// ignoreChanges are the property paths, per URN, the operation leaves as
	// they are (runner.Spec.IgnoreChanges).
	ignoreChanges map[string][]string
	// env is added to the operation's environment.
	env map[string]string
	// plan is Pulumi's update plan file: a preview saves it there, an up
	// applies exactly it (runner.Spec.Plan).
	plan string
	// adopt follows the running Job of this operation that a stopped
	// controller started (adopt_job.go), instead of starting one.
	adopt bool
	// planID and approvedBy go into the record of an up of an approved plan.
	planID, approvedBy string
	// review is a pull request's preview (preview_run.go): it changes
	// nothing in the backend and clears no lock (runner.Spec.Review).
	review bool
	// reviewStack is an operation of a pull request's review stack
	// (preview_reviewstack.go): it clears no lock of the Stack's; a destroy
	// of one removes the stack (removeStack).
	reviewStack, removeStack bool
}

func (o opOptions) recordType(typ runner.OperationType) v1alpha1.OperationType {
	if o.record != "" {
		return o.record
	}
	return v1alpha1.OperationType(typ)
}

// operateWith is operate with options.
func (r *StackReconciler) operateWith(ctx context.Context, st *reconcileState, typ runner.OperationType, art artifact.Artifact, revision string, opts opOptions) (*runner.Result, error) {
	if err := startAllowed(ctx); err != nil {
		return nil, err
	}
	stack := st.stack
	recType := opts.recordType(typ)
	rec := v1alpha1.OperationRecord{
		ID:         newOperationID(runner.OperationType(recType)),
		Type:       recType,
		Revision:   revision,
		StartedAt:  metav1.Now(),
		Outcome:    v1alpha1.OutcomeRunning,
		Plan:       opts.planID,
		ApprovedBy: cutUTF8(opts.approvedBy, 253),
	}
	rec.Host = r.hostOf(stack, rec.ID) // whose lock Pulumi will write
	rec.Shard = r.shardName()          // which shard ends it, should the Stack be relabelled (shard.go)
	if a := st.takeAdoptable(recType, revision); a != nil {
		// A Job a stopped controller started for this very operation runs
		// on: its start is in status already, and its end is awaited.
		rec, opts.adopt = *a, true
		st.operationStarted = true
	} else if err := r.confirmShard(ctx, st); err != nil {
		return nil, err
	} else if err := r.recordStart(ctx, st, rec, typ, art); err != nil {
		return nil, err
	}
	r.inflight.start(stack.UID, rec.ID)
	// The final record is remembered: until the status patch that carries it
	// reaches the cache, a reconcile may still see this operation running.
	defer func() { r.inflight.end(stack.UID, rec) }()
	r.recordf(stack, corev1.EventTypeNormal, "OperationStarted", string(recType), "%s %s of revision %s started", recType, rec.ID, revision)

	res := r.execute(ctx, st, rec.ID, typ, art, opts)
	if res == nil {
		// Its Job runs on while this controller stops; the next one adopts
		// it (adopt_job.go). Nothing is recorded: it has not ended.
		return nil, &ShutdownError{Err: fmt.Errorf("%s %s of revision %s runs on in its Job; the next controller records its end", recType, rec.ID, revision)}
	}
	operationsTotal.WithLabelValues(string(recType), string(res.Outcome)).Inc()
	operationSeconds.WithLabelValues(string(recType)).Observe(res.FinishedAt.Sub(res.StartedAt).Seconds())
	finishRecord(ctx, st, &rec, res)
	r.recordRepairs(stack, &rec, res) // a torn file:// state the runner repaired (operation_repairs.go)
	r.reportPolicy(ctx, st, string(recType), res)

	if res.Outcome == runner.OutcomeSucceeded {
		stack.Status.Failures = 0
		r.recordf(stack, corev1.EventTypeNormal, "OperationSucceeded", string(recType), "%s %s of revision %s succeeded: %s", recType, rec.ID, revision, summaryLine(res))
		return res, nil
	}
	if res.ErrorClass == runner.ErrorClaimed {
		// Retrying cannot help: the stack is another Stack's until a person
		// changes this Stack or releases the other's claim.
		// (summarize records the Stalled event.)
		return nil, claimedError(stack, st.inputs, res.ClaimedBy)
	}
	if endedByShutdown(ctx, &rec) {
		// Not counted, no Warning: the controller, not the program, cut it
		// short (ShutdownError).
		r.recordf(stack, corev1.EventTypeNormal, v1alpha1.InterruptedReason, string(recType),
			"%s %s of revision %s was cut short by the controller's shutdown; the next controller runs it again", recType, rec.ID, revision)
		return nil, &ShutdownError{Err: fmt.Errorf("%s %s of revision %s was cut short by the controller's shutdown; it runs again when the controller is back", recType, rec.ID, revision)}
	}
	if typ != runner.OpDestroy {
		stack.Status.Failures++
		st.requeueAfter = backoff(stack.Status.Failures, stack.GetRetryInterval(), stack.GetRequeueAfter())
	}
	reason := failureReason(res.ErrorClass)
	msg := fmt.Sprintf("%s %s of revision %s failed: %s", recType, rec.ID, revision, rec.Message)
	r.event(stack, corev1.EventTypeWarning, reason, string(recType), msg)
	return nil, transient(reason, fmt.Errorf("%s", msg))
}

// recordStart puts the start of operation rec in status before it runs (its
// running record in the history and in status.currentOperation, the
// attempted revision, Ready Unknown), so that a crash leaves a trace. When
// that patch fails nothing is started, and nothing of it stays.
func (r *StackReconciler) recordStart(ctx context.Context, st *reconcileState, rec v1alpha1.OperationRecord, typ runner.OperationType, art artifact.Artifact) error {
	stack := st.stack
	st.writeFindings() // what was found before is no part of the start taken back
	before := stack.DeepCopy()
	stack.Status.CurrentOperation = rec.DeepCopy()
	stack.Status.PushHistory(rec)
	if typ != runner.OpDestroy {
		// A new program or new inputs start their own backoff; a new revision
		// with the same program (a commit elsewhere in a monorepo) does not.
		if st.programDigest != stack.Status.LastAttemptedProgramDigest || st.inputs.Digest != stack.Status.LastAttemptedInputsDigest {
			stack.Status.Failures = 0
		}
		stack.Status.LastAttemptedRevision = rec.Revision
		stack.Status.LastAttemptedProgramDigest = st.programDigest
		stack.Status.LastAttemptedInputsDigest = st.inputs.Digest
	}
	if typ == runner.OpUp {
		// An up that fails part-way may leave resources: a destroy on deletion
		// needs this program even if no up ever succeeds.
		stack.Status.LastAttemptedArtifact = &v1alpha1.ArtifactReference{Revision: rec.Revision, Digest: art.Digest}
	}
	if err := st.patchStart(ctx, &finding{kind: foundRunning,
		progress: fmt.Sprintf("Running %s %s of revision %s", rec.Type, rec.ID, rec.Revision),
		message:  fmt.Sprintf("Running %s of revision %s", rec.Type, rec.Revision)}); err != nil {
		// Part of the patch may have landed (the conditions are patched
		// apart from the rest of the status): the reconcile's final patch
		// takes the start back, or the next reconcile would find an
		// operation that never ran and record it interrupted.
		attempted := stack.DeepCopy()
		stack.Status = *before.Status.DeepCopy()
		st.rebase(r, attempted)
		return transient(v1alpha1.OperationFailedReason, fmt.Errorf("record the start of %s: %w", typ, err))
	}
	return nil
}

// finishRecord completes rec from the operation's result and puts it in the
// history in place of its running entry; status.currentOperation is cleared.
func finishRecord(ctx context.Context, st *reconcileState, rec *v1alpha1.OperationRecord, res *runner.Result) {
	stack := st.stack
	finished := metav1.NewTime(res.FinishedAt)
	if res.FinishedAt.IsZero() {
		finished = metav1.Now()
	}
	rec.FinishedAt = &finished
	rec.Outcome = v1alpha1.OperationOutcome(res.Outcome)
	rec.Changes = &v1alpha1.ChangeSummary{
		Create: int64(res.Changes.Create), Update: int64(res.Changes.Update),
		Replace: int64(res.Changes.Replace), Delete: int64(res.Changes.Delete),
	}
	rec.Message = truncate(scrub(res.Message, st.inputs.Secrets), 2000)
	// A Job's result comes from its Pod: only the two words the field
	// admits are copied, so that no Pod can make the status patch fail.
	if c := v1alpha1.DependencyCacheResult(res.DependencyCache); c == v1alpha1.DependencyCacheHit || c == v1alpha1.DependencyCacheMiss {
		rec.DependencyCache = c
	}
	if rec.Message == "" && res.Outcome == runner.OutcomeSucceeded {
		rec.Message = summaryLine(res)
	}
	if res.ClearedLocks > 0 {
		rec.Message = truncate(fmt.Sprintf("%s (removed %d stale lock(s) of the interrupted operation)", rec.Message, res.ClearedLocks), 2000)
	}
	switch {
	case res.Outcome == runner.OutcomeSucceeded:
	case rec.Outcome == v1alpha1.OutcomeInterrupted:
		rec.Reason = v1alpha1.InterruptedReason
	case cancelledByShutdown(ctx, res):
		// Cut short by the controller, not by the program: like an
		// interruption, the next controller runs it again at once (decide).
		rec.Reason = v1alpha1.InterruptedReason
	default:
		rec.Reason = failureReason(res.ErrorClass)
	}
	replaceHistory(stack, *rec)
	stack.Status.CurrentOperation = nil
	recordPolicy(st, rec.ID, res)
}

// execute prepares the program's work tree and runs the operation. It
// returns a result, an executor failure becoming an internal failure, but
// for an operation whose Job runs on while the controller stops: nil.
func (r *StackReconciler) execute(ctx context.Context, st *reconcileState, id string, typ runner.OperationType, art artifact.Artifact, opts opOptions) *runner.Result {
	st.operationStarted = true // its start is in status: its end must land (statusContext)
	if typ != runner.OpOutputs {
		st.lastStarted = id // (a read of the outputs records no start)
	}
	operationsRunning.Inc()
	defer operationsRunning.Dec()
	started := time.Now()
	fail := func(class runner.ErrorClass, err error) *runner.Result {
		return &runner.Result{APIVersion: runner.APIVersion, ID: id, Type: typ, Outcome: runner.OutcomeFailed,
			ErrorClass: class, Message: err.Error(), StartedAt: started, FinishedAt: time.Now()}
	}
	if err := r.gatherPolicies(ctx, st, typ); err != nil {
		return fail(policyErrorClass(err), err)
	}
	// The packs travel in the tree the operation runs (both executors);
	// art stays the program's in status.
	art, packs, err := r.withPolicyPacks(ctx, st, typ, art)
	if err != nil {
		return fail(policyPackClass(err), err)
	}
	st.policyPacks = packs
	if r.executorOf(st.stack) == v1alpha1.ExecutorJob {
		return r.executeJob(ctx, st, id, typ, art, opts, fail)
	}
	workDir := filepath.Join(r.WorkDir, id)
	defer os.RemoveAll(workDir)
	// The whole tree, hard-linked from the cache (a program may read files
	// beside its folder), with private copies of the files Pulumi rewrites.
	programDir, tree, err := r.Artifacts.LinkTree(ctx, art, st.stack.Spec.Source.Dir, filepath.Join(workDir, "tree"))
	if err != nil {
		return fail(runner.ErrorProgram, fmt.Errorf("spec.source.dir %q: %w", st.stack.Spec.Source.Dir, err))
	}
	if tree.LinkFallback != nil {
		log.FromContext(ctx).V(1).Info("work tree copied, not linked: put the work and artifacts directories on one file system",
			"reason", tree.LinkFallback.Error(), "bytes", tree.CopiedBytes)
	}
	env, err := r.runnerEnv(ctx, st, workDir) // the identity the program acts as (inputs.Tenancy)
	if err != nil {
		return fail(runner.ErrorAuth, err)
	}
	maps.Copy(env, opts.env)
	spec := r.operationSpec(ctx, st, id, typ, opts, env)
	spec.WorkDir = programDir
	for i := range spec.PolicyPacks {
		spec.PolicyPacks[i].Dir = filepath.Join(workDir, "tree", spec.PolicyPacks[i].Dir)
	}
	spec.PulumiHome = r.PulumiHome
	spec.PulumiCommand = r.PulumiCommand
	spec.LogFile = r.beginLog(ctx, st.stack, id)
	// Live counts for status.currentOperation.changes (operation_progress.go);
	// the patcher ends before this returns, so before the final status write.
	spec.ProgressFile = filepath.Join(workDir, "progress.json")
	stopProgress := r.watchProgress(ctx, st.stack, id, spec.ProgressFile)
	res, err := r.Executor.Run(ctx, spec)
	stopProgress()
	r.endLog(ctx, st.stack, id)
	if changed, verr := r.Artifacts.Verify(art, tree); len(changed) > 0 || verr != nil {
		log.FromContext(ctx).Error(verr, "the operation wrote into the cached program through its work tree; the artifact is dropped and fetched again",
			"digest", art.Digest, "files", changed[:min(len(changed), 10)], "count", len(changed))
	}
	if err != nil {
		// The runner died or was killed: Pulumi may have left its lock behind.
		res := fail(runner.ErrorInternal, err)
		res.Outcome = runner.Outcome(v1alpha1.OutcomeInterrupted)
		return res
	}
	return &res
}

// operationSpec is the operation as both executors hand it to the runner,
// but for where it runs: the program's folder, PULUMI_HOME and the CLI.
func (r *StackReconciler) operationSpec(ctx context.Context, st *reconcileState, id string, typ runner.OperationType, opts opOptions, env map[string]string) runner.Spec {
	return runner.Spec{
		APIVersion:    runner.APIVersion,
		ID:            id,
		Type:          typ,
		StackName:     st.stack.GetStackName(),
		Backend:       st.inputs.Backend,
		Config:        st.inputs.Config,
		Env:           env,
		Refresh:       st.stack.Spec.Refresh || opts.refresh,
		IgnoreChanges: opts.ignoreChanges,
		Targets:       st.stack.Spec.Targets,
		Claim:         claimOf(st.stack),
		ClaimHeld:     claimHeld(st.stack, st.inputs),
		StaleLock:     r.staleLockUnless(ctx, st.stack, opts.review || opts.reviewStack),
		Review:        opts.review,
		RemoveStack:   opts.removeStack,
		Timeout:       runner.Duration(st.stack.GetTimeout()),
		Plan:          opts.plan,
		Policy:        st.policy,
		PolicyPacks:   slices.Clone(st.policyPacks),
	}
}

// staleLockUnless is the stale lock the operation may clear, none for a
// review: a pull request's preview leaves locks to the Stack's own ups.
func (r *StackReconciler) staleLockUnless(ctx context.Context, stack *v1alpha1.Stack, review bool) *runner.StaleLock {
	if review {
		return nil
	}
	return r.staleLock(ctx, stack)
}

// lockMayBeStale is true when our previous operation on this stack ended without
// Pulumi releasing its lock: it was interrupted, or killed at its timeout.
func lockMayBeStale(stack *v1alpha1.Stack) bool {
	return staleLockOwner(stack) != nil
}

// staleLockOwner is the previous operation when it may have left its lock.
// Operations that found the stack locked took no lock of their own: the one
// before them is the candidate still (its lock may be provably dead now, its
// Pod gone since).
func staleLockOwner(stack *v1alpha1.Stack) *v1alpha1.OperationRecord {
	for i, h := range stack.Status.History {
		if h.FinishedAt == nil || h.Reason == v1alpha1.LockedReason {
			continue // the operation starting now, or one that found the lock
		}
		if mayLeaveLock(h) {
			return &stack.Status.History[i]
		}
		return nil
	}
	return nil
}

// mayLeaveLock is true for an operation that ended without Pulumi releasing
// its lock: interrupted, or killed at its timeout.
func mayLeaveLock(h v1alpha1.OperationRecord) bool {
	return h.Outcome == v1alpha1.OutcomeInterrupted ||
		(h.Outcome != v1alpha1.OutcomeSucceeded && h.Reason == v1alpha1.TimeoutReason)
}

// staleLockSince is when the run of dead operations on owner's host began:
// an operation killed before it cleared its predecessor's lock leaves that
// older lock in place, and it is as much ours and as dead.
func staleLockSince(stack *v1alpha1.Stack, owner *v1alpha1.OperationRecord) metav1.Time {
	since := owner.StartedAt
	for _, h := range stack.Status.History {
		switch {
		case h.FinishedAt == nil || h.Reason == v1alpha1.LockedReason:
			continue
		case !mayLeaveLock(h) || h.Host != owner.Host:
			return since
		case h.StartedAt.Before(&since):
			since = h.StartedAt
		}
	}
	return since
}

// failureReason maps the runner's error class to a condition reason.
func failureReason(c runner.ErrorClass) string {
	switch c {
	case runner.ErrorProgram:
		return v1alpha1.ProgramErrorReason
	case runner.ErrorAuth:
		return v1alpha1.AuthenticationFailedReason
	case runner.ErrorBackend:
		return v1alpha1.BackendFailedReason
	case runner.ErrorLocked:
		return v1alpha1.LockedReason
	case runner.ErrorTimeout:
		return v1alpha1.TimeoutReason
	case runner.ErrorClaimed:
		return v1alpha1.StackClaimedReason
	case runner.ErrorPlanInvalid:
		return v1alpha1.PlanInvalidReason
	case runner.ErrorRunnerPod:
		return v1alpha1.RunnerPodFailedReason
	case runner.ErrorPolicy:
		return v1alpha1.PolicyViolationReason
	case runner.ErrorPolicyInvalid:
		return v1alpha1.PolicyInvalidReason
	case runner.ErrorPolicyPack:
		return v1alpha1.PolicyPackFailedReason
	}
	return v1alpha1.OperationFailedReason
}

func summaryLine(res *runner.Result) string {
	c := res.Changes
	return fmt.Sprintf("%d created, %d updated, %d replaced, %d deleted, %d unchanged", c.Create, c.Update, c.Replace, c.Delete, c.Same)
}

func newOperationID(typ runner.OperationType) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return string(typ) + "-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	// Cut at the start of a character: half of one is not valid UTF-8.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
