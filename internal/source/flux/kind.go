package flux

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/serror"
	"github.com/stackpilot/stackpilot/internal/source"
)

// Kind is spec.source.sourceRef: it fetches the artifacts Flux sources
// publish, once per digest. There is nothing to resolve: source-controller
// polls, and a new artifact starts the Stacks that follow it through a
// watch (watch.go).
type Kind struct {
	// Reader reads the Flux sources (the API server, not a cache).
	Reader  client.Reader
	Fetcher *Fetcher
	Store   *artifact.Store
	// AllowCrossNamespaceRefs lets a Stack follow a source in another
	// namespace (--allow-cross-namespace-refs).
	AllowCrossNamespaceRefs bool
}

var _ source.Kind = (*Kind)(nil)

// NewKind returns a Kind whose downloads, and the files in them, are each
// at most maxSize bytes (0: the default).
func NewKind(reader client.Reader, store *artifact.Store, maxSize int64, allowCrossNamespaceRefs bool) *Kind {
	f := NewFetcher()
	if maxSize > 0 {
		f.MaxSize = maxSize
	}
	return &Kind{Reader: reader, Fetcher: f, Store: store, AllowCrossNamespaceRefs: allowCrossNamespaceRefs}
}

// Selected is true for spec.source.sourceRef.
func (k *Kind) Selected(stack *v1alpha1.Stack) bool { return stack.Spec.Source.SourceRef != nil }

// Secrets: none; the source itself is watched (watch.go).
func (k *Kind) Secrets(*v1alpha1.Stack) []string { return nil }

// Hints: a program is missing until the source publishes it.
func (k *Kind) Hints() source.Hints {
	return source.Hints{AddFolder: "publish the folder in the source's artifact", Publish: "publish an artifact"}
}

// sourceKey names the source a Stack follows.
func sourceKey(stack *v1alpha1.Stack) (kind, namespace, name string) {
	ref := stack.Spec.Source.SourceRef
	namespace = ref.Namespace
	if namespace == "" {
		namespace = stack.Namespace
	}
	return ref.Kind, namespace, ref.Name
}

// Resolve reads the artifact spec.source.sourceRef's source publishes.
func (k *Kind) Resolve(ctx context.Context, stack *v1alpha1.Stack, _ source.ResolveRequest) (source.Resolved, error) {
	art, err := k.artifact(ctx, stack)
	if err != nil {
		return source.Resolved{}, err
	}
	return source.Resolved{Revision: art.Revision, Fetch: func(ctx context.Context) (artifact.Artifact, error) {
		return k.fetch(ctx, *art)
	}}, nil
}

// artifact reads the source and its artifact, refusing another
// namespace unless allowed.
func (k *Kind) artifact(ctx context.Context, stack *v1alpha1.Stack) (*Artifact, error) {
	kind, namespace, name := sourceKey(stack)
	if namespace != stack.Namespace && !k.AllowCrossNamespaceRefs {
		return nil, serror.Stalling(v1alpha1.CrossNamespaceRefNotAllowedReason,
			"spec.source.sourceRef names %s %s/%s in another namespace: move the Stack or the source into one namespace, or run the controller with --allow-cross-namespace-refs",
			kind, namespace, name)
	}
	src, err := Get(ctx, k.Reader, kind, namespace, name)
	if err == nil {
		var art *Artifact
		if art, err = src.ReadyArtifact(); err == nil {
			return art, nil
		}
	}
	var notReady *NotReadyError
	if errors.As(err, &notReady) {
		return nil, serror.Waiting(v1alpha1.SourceNotReadyReason, "%v", err)
	}
	return nil, serror.Transient(v1alpha1.SourceNotReadyReason, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err))
}

func (k *Kind) fetch(ctx context.Context, art Artifact) (artifact.Artifact, error) {
	a, err := k.Fetcher.Fetch(ctx, art, k.Store)
	if err != nil {
		return artifact.Artifact{}, fetchError(err, art.Revision)
	}
	return a, nil
}

// fetchError: a tarball over the bound or with an unsafe entry is wrong
// for this revision alone (the next one may be fine); a wrong digest and a
// failed download are retried.
func fetchError(err error, revision string) error {
	var limit *LimitError
	var limits *artifact.LimitError
	var unsafe *artifact.UnsafePathError
	var digest *DigestError
	switch {
	case errors.As(err, &limit), errors.As(err, &limits):
		return serror.StallingAt(revision, v1alpha1.ArtifactFailedReason, "revision %s: %v (controller flag %s; checked again at the next artifact)", revision, err, source.LimitFlag(err))
	case errors.As(err, &unsafe):
		return serror.StallingAt(revision, v1alpha1.ArtifactFailedReason, "revision %s: %v (checked again at the next artifact)", revision, err)
	case errors.As(err, &digest):
		return serror.Transient(v1alpha1.ArtifactFailedReason, err)
	case source.IsStalling(err):
		return serror.StallingAt(revision, v1alpha1.ArtifactFailedReason, "revision %s: %v", revision, err)
	}
	return serror.Transient(v1alpha1.ArtifactFailedReason, err)
}

// FetchRevision fetches a revision recorded in status again (for destroy
// when the cache lost it): only while the source still publishes it.
func (k *Kind) FetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error) {
	art, err := k.artifact(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and its source cannot be read: %w", revision, err)
	}
	if art.Revision != revision {
		kind, namespace, name := sourceKey(stack)
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached, and %s %s/%s now publishes %s", revision, kind, namespace, name, art.Revision)
	}
	return k.fetch(ctx, *art)
}
