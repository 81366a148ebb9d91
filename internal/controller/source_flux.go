package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/source/flux"
)

// FluxSource fetches the artifacts Flux sources publish, once per digest.
// There is nothing to resolve: source-controller polls, and a new artifact
// starts the Stacks that follow it through a watch (setup.go).
type FluxSource struct {
	Fetcher *flux.Fetcher
}

// NewFluxSource returns a FluxSource whose downloads, and the files in them,
// are each at most maxSize bytes (0: the default).
func NewFluxSource(maxSize int64) *FluxSource {
	f := flux.NewFetcher()
	if maxSize > 0 {
		f.MaxSize = maxSize
	}
	return &FluxSource{Fetcher: f}
}

// fluxSourceKey names the source a Stack follows.
func fluxSourceKey(stack *v1alpha1.Stack) (kind, namespace, name string) {
	ref := stack.Spec.Source.SourceRef
	namespace = ref.Namespace
	if namespace == "" {
		namespace = stack.Namespace
	}
	return ref.Kind, namespace, ref.Name
}

// resolveFlux reads the artifact spec.source.sourceRef's source publishes.
func (r *StackReconciler) resolveFlux(ctx context.Context, st *reconcileState) error {
	art, err := r.fluxArtifact(ctx, st.stack)
	if err != nil {
		return err
	}
	st.revision = art.Revision
	st.fetch = func(ctx context.Context) (artifact.Artifact, error) {
		return r.fluxFetch(ctx, *art)
	}
	return nil
}

// fluxArtifact reads the source and its artifact, refusing another
// namespace unless allowed.
func (r *StackReconciler) fluxArtifact(ctx context.Context, stack *v1alpha1.Stack) (*flux.Artifact, error) {
	kind, namespace, name := fluxSourceKey(stack)
	if namespace != stack.Namespace && !r.AllowCrossNamespaceRefs {
		return nil, stalling(v1alpha1.CrossNamespaceRefNotAllowedReason,
			"spec.source.sourceRef names %s %s/%s in another namespace: move the Stack or the source into one namespace, or run the controller with --allow-cross-namespace-refs",
			kind, namespace, name)
	}
	src, err := flux.Get(ctx, r.APIReader, kind, namespace, name)
	if err == nil {
		var art *flux.Artifact
		if art, err = src.ReadyArtifact(); err == nil {
			return art, nil
		}
	}
	var notReady *flux.NotReadyError
	if errors.As(err, &notReady) {
		return nil, waiting(v1alpha1.SourceNotReadyReason, "%v", err)
	}
	return nil, transient(v1alpha1.SourceNotReadyReason, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err))
}

func (r *StackReconciler) fluxFetch(ctx context.Context, art flux.Artifact) (artifact.Artifact, error) {
	a, err := r.Flux.Fetcher.Fetch(ctx, art, r.Artifacts)
	if err != nil {
		return artifact.Artifact{}, fluxFetchError(err, art.Revision)
	}
	return a, nil
}

// fluxFetchError: a tarball over the bound or with an unsafe entry is wrong
// for this revision alone (the next one may be fine); a wrong digest and a
// failed download are retried.
func fluxFetchError(err error, revision string) error {
	var limit *flux.LimitError
	var limits *artifact.LimitError
	var unsafe *artifact.UnsafePathError
	var digest *flux.DigestError
	switch {
	case errors.As(err, &limit), errors.As(err, &limits):
		return stallingAt(revision, v1alpha1.ArtifactFailedReason, "revision %s: %v (controller flag %s; checked again at the next artifact)", revision, err, limitFlag(err))
	case errors.As(err, &unsafe):
		return stallingAt(revision, v1alpha1.ArtifactFailedReason, "revision %s: %v (checked again at the next artifact)", revision, err)
	case errors.As(err, &digest):
		return transient(v1alpha1.ArtifactFailedReason, err)
	case source.IsStalling(err):
		return stallingAt(revision, v1alpha1.ArtifactFailedReason, "revision %s: %v", revision, err)
	}
	return transient(v1alpha1.ArtifactFailedReason, err)
}

// fluxFetchRevision fetches a revision recorded in status again (for destroy
// when the cache lost it): only while the source still publishes it.
func (r *StackReconciler) fluxFetchRevision(ctx context.Context, stack *v1alpha1.Stack, revision string) (artifact.Artifact, error) {
	art, err := r.fluxArtifact(ctx, stack)
	if err != nil {
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached and its source cannot be read: %w", revision, err)
	}
	if art.Revision != revision {
		kind, namespace, name := fluxSourceKey(stack)
		return artifact.Artifact{}, fmt.Errorf("the program of revision %s is not cached, and %s %s/%s now publishes %s", revision, kind, namespace, name, art.Revision)
	}
	return r.fluxFetch(ctx, *art)
}
