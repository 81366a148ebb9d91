// Package serror holds the typed errors that choose what the Stack
// reconciler does after a failure, as in Flux: a StallingError needs a
// change by a person (no retry until the spec or a referenced object
// changes), a WaitingError requeues after a delay without counting as a
// failure, and any other error is transient and backs off. They live apart
// from the reconciler so that the packages it calls (the inputs resolver,
// the source kinds) can return them.
package serror

import (
	"errors"
	"fmt"
	"time"
)

// StallingError is a problem the controller cannot fix by retrying.
type StallingError struct {
	Reason string // condition reason
	Err    error
	// Revision is set when the problem is in the program at this source
	// revision (a missing dir, no Pulumi.yaml): retrying it is useless, but a
	// new commit can fix it, so the Stack is checked again at spec.interval.
	Revision string
}

func (e *StallingError) Error() string { return e.Err.Error() }
func (e *StallingError) Unwrap() error { return e.Err }

// Stalling builds a StallingError with a formatted message.
func Stalling(reason, format string, args ...any) *StallingError {
	return &StallingError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// StallingAt builds a StallingError for a problem in the program at revision.
func StallingAt(revision, reason, format string, args ...any) *StallingError {
	return &StallingError{Reason: reason, Err: fmt.Errorf(format, args...), Revision: revision}
}

// WaitingError is a condition that will likely clear on its own.
type WaitingError struct {
	Reason       string
	Err          error
	RequeueAfter time.Duration
}

func (e *WaitingError) Error() string { return e.Err.Error() }
func (e *WaitingError) Unwrap() error { return e.Err }

// Waiting builds a WaitingError with a formatted message.
func Waiting(reason, format string, args ...any) *WaitingError {
	return &WaitingError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// TransientError is a failure worth retrying with backoff; Reason is its condition reason.
type TransientError struct {
	Reason string
	Err    error
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Transient wraps err as a TransientError with reason.
func Transient(reason string, err error) *TransientError {
	return &TransientError{Reason: reason, Err: err}
}

// OutermostTyped is the first StallingError, WaitingError or TransientError in
// err's chain, outermost first, or nil: a step that wraps another error in a
// typed error of its own decides the outcome (a destroy that fails because an
// input is missing is a DestroyFailed failure, not a wait for that input).
func OutermostTyped(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e.(type) {
		case *StallingError, *WaitingError, *TransientError:
			return e
		}
	}
	return nil
}

// ReasonOf gives the condition reason carried by err's outermost typed error, or def.
func ReasonOf(err error, def string) string {
	switch e := OutermostTyped(err).(type) {
	case *StallingError:
		return e.Reason
	case *WaitingError:
		return e.Reason
	case *TransientError:
		return e.Reason
	}
	return def
}
