package source

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/serror"
)

// Kind is one kind of spec.source (git, oci, a Flux sourceRef): how the
// Stack reconciler resolves it, fetches it, and watches what it references.
// Errors are the serror package's typed errors, so the reconciler knows
// whether to stall, wait or retry.
type Kind interface {
	// Selected is true when stack's spec.source is of this kind.
	Selected(stack *v1alpha1.Stack) bool
	// Resolve finds the revision the source points at now and how to fetch it.
	Resolve(ctx context.Context, stack *v1alpha1.Stack, req ResolveRequest) (Resolved, error)
	// FetchRevision fetches a revision recorded in status again (for
	// destroy when the cache lost it).
	FetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error)
	// Secrets are the names of the Secrets, in stack's namespace, that the
	// source reads: a change of one reconciles the Stack.
	Secrets(stack *v1alpha1.Stack) []string
	// Watch adds to b the watches that start a Stack when what its source
	// follows changes (a kind with nothing to watch returns b).
	Watch(ctx context.Context, mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error)
	// Hints says how a user puts a missing program into this kind of source.
	Hints() Hints
}

// Kinds are the source kinds a controller knows.
type Kinds []Kind

// Of is the kind of stack's spec.source, or nil when it sets none.
func (ks Kinds) Of(stack *v1alpha1.Stack) Kind {
	for _, k := range ks {
		if k.Selected(stack) {
			return k
		}
	}
	return nil
}

// ResolveRequest is how a reconcile asks for a resolution.
type ResolveRequest struct {
	// MaxAge is how old a resolution shared with other Stacks may be and
	// still serve this one.
	MaxAge time.Duration
	// Requested is set while a reconcile-now request is not handled: the
	// resolution must be fresh.
	Requested bool
	// RequestedAt is when that request was made, when it says so in a way
	// that can be trusted (else zero): a resolution made since serves it, so
	// the many Stacks one push asks to reconcile share one.
	RequestedAt time.Time
}

// Resolved is a revision a Kind resolved.
type Resolved struct {
	// Revision is in Flux's format (main@sha1:..., v1@sha256:...).
	Revision string
	// Fetch brings the revision into the artifact cache.
	Fetch func(ctx context.Context) (artifact.Artifact, error)
}

// Hints say, in words for a condition message, how a user fixes a program
// missing from a revision.
type Hints struct {
	// AddFolder: how to put spec.source.dir into the source ("commit the folder").
	AddFolder string
	// Publish: how to publish a program ("commit").
	Publish string
}

// Failure turns the typed errors of the fetchers into the reconciler's:
// refused credentials and a missing repository are retried (they may be a
// rotation or a creation in progress), a spec error stalls. failedReason is
// the kind's reason for any other failure.
func Failure(err error, failedReason string) error {
	var authErr *AuthError
	var notFound *NotFoundError
	switch {
	case errors.As(err, &authErr):
		return serror.Transient(v1alpha1.AuthenticationFailedReason, err)
	case errors.As(err, &notFound):
		return serror.Transient(v1alpha1.SourceNotFoundReason, err)
	case IsStalling(err):
		return serror.Stalling(v1alpha1.InvalidSpecReason, "%v", err)
	}
	return serror.Transient(failedReason, err)
}

// LimitFlag names the controller flag that sets the artifact cache's bound
// err reports, so a message over a bound says what an operator can change:
// a file count is --artifact-max-files, any size --artifact-max-size.
func LimitFlag(err error) string {
	var al *artifact.LimitError
	if errors.As(err, &al) && al.Limit == "file count" {
		return "--artifact-max-files"
	}
	return "--artifact-max-size"
}
