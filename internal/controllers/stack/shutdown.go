package stack

import (
	"context"
	"errors"
	"time"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// Shutdown, as the controller sees it: on SIGTERM the manager cancels the
// context of every reconcile and waits for them (GracefulShutdownTimeout). A
// reconcile that has not started its operation yet starts none (startAllowed);
// a running operation sees its context end, and the executor asks its runner to
// cancel Pulumi gracefully (internal/executor.Local.CancelGrace). The result,
// `cancelled` or `succeeded` when it finished in time, must still reach status
// although the context is gone: statusContext.

// FinalPatchTimeout bounds the status patch that records the end of an
// operation once the controller is shutting down. The manager's graceful
// shutdown timeout must leave this much time after the executor's cancel grace.
const FinalPatchTimeout = 10 * time.Second

// ErrShuttingDown says an operation was not started because the controller is
// stopping. Nothing is recorded: the next controller decides again.
var ErrShuttingDown = errors.New("the controller is shutting down: operation not started")

// startAllowed refuses to start an operation once the reconcile's context has
// ended. This controller sets no reconcile timeout, so an ended context means
// the manager is stopping. A step's context after an operation that ended
// during the shutdown (stepContext) refuses too.
func startAllowed(ctx context.Context) error {
	if stopping(ctx) {
		return ErrShuttingDown
	}
	return nil
}

// stopping is true once the manager is stopping: the reconcile's context
// ended, or this is the context the steps after an operation got then.
func stopping(ctx context.Context) bool {
	return ctx.Err() != nil || ctx.Value(drainingKey{}) != nil
}

// drainingKey marks the context of the steps that finish an operation's
// work while the controller stops (stepContext).
type drainingKey struct{}

// stepContext is the context for what follows an operation in this
// reconcile. While the controller runs on, that is the reconcile's own. Once
// the operation has ended during a shutdown, the reconcile's context is
// gone, yet what the operation did must still be recorded whole: its inputs
// kept for a rollback, its outputs published (else the next controller
// waits out a publish backoff for a "context canceled"). So those steps get
// a context of their own, bounded by FinalPatchTimeout, on which no other
// operation starts (startAllowed).
func (st *reconcileState) stepContext(ctx context.Context) context.Context {
	if !st.operationStarted || ctx.Err() == nil {
		return ctx
	}
	if st.drain == nil {
		st.drain, st.drainCancel = context.WithTimeout(
			context.WithValue(context.WithoutCancel(ctx), drainingKey{}, true), FinalPatchTimeout)
	}
	return st.drain
}

// endDrain releases stepContext's context, if one was made.
func (st *reconcileState) endDrain() {
	if st.drainCancel != nil {
		st.drainCancel()
	}
}

// ShutdownError says that the controller's shutdown cut an operation short:
// Pulumi stopped cleanly when asked, or the runner was killed after the
// cancel grace. It is no failure of the program: Ready is Unknown (the
// outcome is not known until the operation runs again), no Warning event
// is sent, the failure count stays, and the next controller runs the
// operation again at once (lastInterrupted). Ready=False here would be a
// failure to Alerts, and the apply after the restart a "recovery".
type ShutdownError struct {
	Err error
}

func (e *ShutdownError) Error() string { return e.Err.Error() }
func (e *ShutdownError) Unwrap() error { return e.Err }

// statusContext is the context of a reconcile's final status patch. Once the
// start of an operation is in status, its end must be too, shutdown or not:
// otherwise the next controller finds an operation that looks interrupted and
// clears a lock Pulumi had released. So that patch outlives the reconcile's
// context, and is bounded by FinalPatchTimeout only from when that context
// ends: while the controller runs on, a slow API server (seconds a request on
// a saturated machine) is waited for, not turned into a failed reconcile
// whose outcome comes back from the data dir on the next one. Without an
// operation, the reconcile's own context is kept: a stopping controller
// records nothing else.
func statusContext(ctx context.Context, st *reconcileState) (context.Context, context.CancelFunc) {
	if !st.operationStarted {
		return ctx, func() {}
	}
	return boundedAfterStop(ctx, FinalPatchTimeout)
}

// boundedAfterStop returns a context that does not end with ctx but bound
// after it: at once bounded when ctx has already ended (its deadline then
// says so), else bounded from the moment ctx ends.
func boundedAfterStop(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), bound)
	}
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-out.Done():
		}
	})
	return out, func() {
		stop()
		cancel()
	}
}

// cancelledByShutdown is true for an operation that Pulumi stopped cleanly
// because the controller is stopping (its reconcile's context ended).
func cancelledByShutdown(ctx context.Context, res *runner.Result) bool {
	return res.Outcome == runner.OutcomeCancelled && stopping(ctx)
}

// endedByShutdown is true for an operation whose record says the
// controller cut it short (finishRecord) while the controller stops: Pulumi
// cancelled it, or the runner was killed after its cancel grace.
func endedByShutdown(ctx context.Context, rec *v1alpha1.OperationRecord) bool {
	return stopping(ctx) && rec.Reason == v1alpha1.InterruptedReason
}

// lastInterrupted is true when the newest finished operation was cut short by
// the controller: found unfinished after a crash (recoverInterrupted), or
// cancelled on shutdown. decide runs the first such operation again at once.
func lastInterrupted(stack *v1alpha1.Stack) bool {
	for _, h := range stack.Status.History {
		if h.FinishedAt != nil && h.Type != v1alpha1.OperationDriftCheck {
			return h.Reason == v1alpha1.InterruptedReason
		}
	}
	return false
}
