package stack

import "github.com/stackpilot/stackpilot/internal/serror"

// The reconciler's typed errors choose what happens next (see package
// serror); these short names keep the steps as they were written.
type (
	StallingError  = serror.StallingError
	WaitingError   = serror.WaitingError
	TransientError = serror.TransientError
)

var (
	stalling       = serror.Stalling
	stallingAt     = serror.StallingAt
	waiting        = serror.Waiting
	transient      = serror.Transient
	outermostTyped = serror.OutermostTyped
	reasonOf       = serror.ReasonOf
)
