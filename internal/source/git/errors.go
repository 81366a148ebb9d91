package git

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/stackpilot/stackpilot/internal/source"
)

// classify turns a go-git error into the typed errors of package source,
// so the reconciler can tell a bad Secret from a missing branch from a
// flaky network. op says what we were doing ("list references", "clone");
// ref names what we looked for, for not-found messages.
//
// Messages are built here rather than quoted from go-git, whose errors may
// repeat URLs or server answers; what is quoted goes through redaction.
func classify(err error, op, repoURL string, ref string, auth *Auth) error {
	url := source.RedactURL(repoURL)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &source.TransientError{URL: url, Op: op, Reason: err.Error(), Err: err}
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return &source.AuthError{URL: url, Reason: "credentials missing or refused by the server (HTTP 401)", Err: err}
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return &source.AuthError{URL: url, Reason: "access denied by the server (HTTP 403)", Err: err}
	case errors.Is(err, transport.ErrInvalidAuthMethod):
		return &source.AuthError{URL: url, Reason: "these credentials do not apply to this URL's protocol", Err: err}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return &source.NotFoundError{URL: url, Reason: "the server has no such repository, or does not show it to these credentials", Err: err}
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return &source.NotFoundError{URL: url, Ref: ref, Reason: "the repository is empty", Err: err}
	case errors.Is(err, plumbing.ErrReferenceNotFound), errors.Is(err, gogit.NoMatchingRefSpecError{}):
		return &source.NotFoundError{URL: url, Ref: ref, Err: err}
	}
	if e, ok := sshError(err, url); ok {
		return e
	}
	if status := httpStatus(err); status != 0 {
		return &source.TransientError{URL: url, Op: op, Reason: fmt.Sprintf("server answered %d %s", status, http.StatusText(status)), Err: err}
	}
	msg := strings.ReplaceAll(err.Error(), repoURL, url)
	return &source.TransientError{URL: url, Op: op, Reason: auth.redact(msg), Err: err}
}

// sshError recognises refusals during the SSH handshake. x/crypto/ssh
// reports a refused key only in words, hence the string match.
func sshError(err error, url string) (error, bool) {
	var keyErr *knownhosts.KeyError
	if errors.As(err, &keyErr) {
		reason := "the server's host key is not in known_hosts"
		if len(keyErr.Want) > 0 {
			reason = "the server's host key does not match known_hosts (changed key, or someone in between)"
		}
		return &source.AuthError{URL: url, Key: KeyKnownHosts, Reason: reason, Err: err}, true
	}
	if strings.Contains(err.Error(), "ssh: unable to authenticate") {
		return &source.AuthError{URL: url, Reason: "the SSH key was refused by the server", Err: err}, true
	}
	return nil, false
}

// httpStatus digs the status out of go-git's *http.Err, which it wraps in
// an UnexpectedError that does not unwrap.
func httpStatus(err error) int {
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var he *githttp.Err
	if errors.As(err, &he) && he.Response != nil {
		return he.Response.StatusCode
	}
	return 0
}
