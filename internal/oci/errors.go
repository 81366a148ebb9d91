package oci

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// AuthError reports a registry that refused the request (401 or 403). Its
// message names the registry and what to check, never the credentials.
type AuthError struct {
	Registry  string
	Status    int
	Anonymous bool // no credentials were sent
	err       error
}

func (e *AuthError) Error() string {
	what := "rejected the credentials"
	hint := "check the username and password or token for it (Docker config, --creds or the dockerconfigjson Secret)"
	if e.Status == http.StatusForbidden {
		what = "denied access"
		hint = "check that these credentials may read (or push to) this repository"
	}
	if e.Anonymous {
		what = "requires credentials"
		hint = "give credentials for it (Docker config, --creds or the dockerconfigjson Secret)"
	}
	return fmt.Sprintf("registry %s %s (HTTP %d): %s", e.Registry, what, e.Status, hint)
}

// Unwrap gives the transport error, for callers that need the status details.
func (e *AuthError) Unwrap() error { return e.err }

// NotFoundError reports a repository, tag, digest or layer the registry does
// not have.
type NotFoundError struct {
	Ref string
	err error
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s not found in the registry: check the repository, tag or digest", e.Ref)
}

func (e *NotFoundError) Unwrap() error { return e.err }

// LimitError reports a layer larger than the size bound, found from the
// manifest before download or while reading.
type LimitError struct {
	Layer string // layer digest
	Size  int64  // size announced by the manifest (or read so far)
	Max   int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("layer %s is %d bytes, over the limit of %d bytes: raise the maximum artifact size or make the artifact smaller", e.Layer, e.Size, e.Max)
}

// DigestError reports a layer whose bytes do not match its digest: the
// registry (or something between) changed it. Nothing of it is kept.
type DigestError struct {
	Layer string // expected digest
	Got   string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("layer %s failed verification: its content has digest %s; the registry served different bytes than the manifest names, nothing was extracted", e.Layer, e.Got)
}

// classify turns a go-containerregistry transport error into our typed
// errors; ref names what was asked for and registry where.
func classify(err error, registry, ref string, anonymous bool) error {
	if err == nil {
		return nil
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		return err
	}
	switch te.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return &AuthError{Registry: registry, Status: te.StatusCode, Anonymous: anonymous, err: err}
	case http.StatusNotFound:
		return &NotFoundError{Ref: ref, err: err}
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
			return &NotFoundError{Ref: ref, err: err}
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return &AuthError{Registry: registry, Status: te.StatusCode, Anonymous: anonymous, err: err}
		}
	}
	return err
}
