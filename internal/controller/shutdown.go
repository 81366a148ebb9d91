package controller

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
// the manager is stopping.
func startAllowed(ctx context.Context) error {
	if ctx.Err() != nil {
		return ErrShuttingDown
	}
	return nil
}

// statusContext is the context of a reconcile's final status patch. Once the
// start of an operation is in status, its end must be too, shutdown or not:
// otherwise the next controller finds an operation that looks interrupted and
// clears a lock Pulumi had released. So that patch outlives the reconcile's
// context, bounded by FinalPatchTimeout. Without an operation, the reconcile's
// own context is kept: a stopping controller records nothing else.
func statusContext(ctx context.Context, st *reconcileState) (context.Context, context.CancelFunc) {
	if !st.operationStarted {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), FinalPatchTimeout)
}

// cancelledByShutdown is true for an operation that Pulumi stopped cleanly
// because the controller is stopping (its reconcile's context ended).
func cancelledByShutdown(ctx context.Context, res *runner.Result) bool {
	return res.Outcome == runner.OutcomeCancelled && ctx.Err() != nil
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
