package source

import (
	"errors"
	"fmt"
)

// AuthError reports credentials that cannot be used: either the Secret
// itself is unusable (Key names the offending data key, e.g. "known_hosts"),
// or the server refused the credentials (Key is empty).
//
// A malformed Secret will not fix itself, so the reconciler should stall
// with the message; a refusal by the server may be a rotation in progress and
// is worth retrying with backoff. Messages never contain secret values.
type AuthError struct {
	// URL is the repository address with any userinfo removed.
	URL string
	// Key is the Secret data key at fault, when the Secret is the problem.
	Key string
	// Reason says what is wrong, in words a user can act on.
	Reason string
	// Err is the underlying error, if any. Its text is not part of Error():
	// transport errors may quote request details we do not control.
	Err error
}

func (e *AuthError) Error() string {
	switch {
	case e.Key != "" && e.URL != "":
		return fmt.Sprintf("invalid credentials for %s: secret key %q: %s", e.URL, e.Key, e.Reason)
	case e.Key != "":
		return fmt.Sprintf("invalid credentials: secret key %q: %s", e.Key, e.Reason)
	case e.URL != "":
		return fmt.Sprintf("authentication to %s failed: %s", e.URL, e.Reason)
	default:
		return "authentication failed: " + e.Reason
	}
}

func (e *AuthError) Unwrap() error { return e.Err }

// InvalidSecret reports whether the Secret itself is at fault (as opposed to
// the server refusing otherwise well-formed credentials).
func (e *AuthError) InvalidSecret() bool { return e.Key != "" }

// NotFoundError reports a repository, or a reference in it, that does not
// exist (or that the server hides from these credentials, as GitHub does
// with 404 for private repositories).
type NotFoundError struct {
	// URL is the repository address with any userinfo removed.
	URL string
	// Ref is the reference that was looked for ("branch main",
	// "tag v1.0.0", "semver >=1.0", "commit abc..."); empty when the
	// repository itself is missing.
	Ref string
	// Reason adds detail, e.g. "repository is empty".
	Reason string
	Err    error
}

func (e *NotFoundError) Error() string {
	var msg string
	if e.Ref != "" {
		msg = fmt.Sprintf("%s not found in %s", e.Ref, e.URL)
	} else {
		msg = fmt.Sprintf("repository %s not found", e.URL)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// TransientError reports a failure that may go away by itself: network
// errors, timeouts, 5xx answers, a branch that moved under our feet.
// The reconciler retries with backoff.
type TransientError struct {
	URL string
	// Op is what we were doing: "list references", "clone", ...
	Op string
	// Reason is a credential-free description of the failure.
	Reason string
	Err    error
}

func (e *TransientError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Op, e.URL, e.Reason)
}

func (e *TransientError) Unwrap() error { return e.Err }

// InvalidSpecError reports a source spec that can never work, such as a
// malformed URL, semver constraint or commit hash. Retrying will not help;
// the reconciler should stall and tell the user what to fix.
type InvalidSpecError struct {
	Field  string // spec field, e.g. "ref.semver"
	Value  string // the offending value, credential-free
	Reason string
}

func (e *InvalidSpecError) Error() string {
	return fmt.Sprintf("invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// IsStalling reports whether err will not go away by retrying without a
// change to the spec or the Secret.
func IsStalling(err error) bool {
	var ae *AuthError
	if errors.As(err, &ae) && ae.InvalidSecret() {
		return true
	}
	var ie *InvalidSpecError
	return errors.As(err, &ie)
}
