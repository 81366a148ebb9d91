package flux

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Group and Version are those of the sources the pinned source-controller
// serves.
const (
	Group   = "source.toolkit.fluxcd.io"
	Version = "v1"
)

// Kinds are the source kinds a Stack may follow.
var Kinds = []string{"GitRepository", "OCIRepository", "Bucket", "ExternalArtifact"}

// GVK returns the group, version and kind of a source kind.
func GVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: Version, Kind: kind}
}

// Artifact is what a source's .status.artifact says: where to download the
// tarball, its revision in Flux's form and its digest ("sha256:<hex>").
type Artifact struct {
	URL      string `json:"url"`
	Revision string `json:"revision"`
	Digest   string `json:"digest,omitempty"`
	Size     *int64 `json:"size,omitempty"`
}

// Source is the part of a Flux source object the controller reads.
type Source struct {
	Kind, Namespace, Name string
	Generation            int64
	Artifact              *Artifact
	Ready                 *metav1.Condition
}

// Ref names the source for messages: "GitRepository infra/fleet".
func (s *Source) Ref() string { return s.Kind + " " + s.Namespace + "/" + s.Name }

// Get reads a source with reader (the API server, not a cache, so that a
// Stack never acts on an artifact older than the one just published).
// Errors: *NotReadyError when it does not exist or its CRD is not
// installed.
func Get(ctx context.Context, reader client.Reader, kind, namespace, name string) (*Source, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK(kind))
	ref := kind + " " + namespace + "/" + name
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &NotReadyError{Ref: ref, Message: "not found"}
	case meta.IsNoMatchError(err):
		return nil, &NotReadyError{Ref: ref, Message: fmt.Sprintf("the %s API (%s/%s) is not installed in the cluster: install Flux's source-controller", kind, Group, Version)}
	case err != nil:
		return nil, err
	}
	return FromUnstructured(u)
}

// FromUnstructured reads a source object.
func FromUnstructured(u *unstructured.Unstructured) (*Source, error) {
	s := &Source{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Generation: u.GetGeneration()}
	var status struct {
		Artifact   *Artifact          `json:"artifact,omitempty"`
		Conditions []metav1.Condition `json:"conditions,omitempty"`
	}
	if raw, ok := u.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
			return nil, fmt.Errorf("%s: reading .status: %w", s.Ref(), err)
		}
	}
	s.Artifact = status.Artifact
	s.Ready = meta.FindStatusCondition(status.Conditions, "Ready")
	return s, nil
}

// ReadyArtifact returns the source's artifact when the source is Ready at
// its latest generation and has one; otherwise a *NotReadyError carrying the
// source's own message.
func (s *Source) ReadyArtifact() (*Artifact, error) {
	switch {
	case s.Ready == nil:
		return nil, &NotReadyError{Ref: s.Ref(), Message: "it has no Ready condition yet (is source-controller running?)"}
	case s.Ready.Status != metav1.ConditionTrue:
		return nil, &NotReadyError{Ref: s.Ref(), Message: fmt.Sprintf("Ready is %s (%s): %s", s.Ready.Status, s.Ready.Reason, s.Ready.Message)}
	case s.Ready.ObservedGeneration != 0 && s.Ready.ObservedGeneration < s.Generation:
		return nil, &NotReadyError{Ref: s.Ref(), Message: fmt.Sprintf("its latest generation (%d) is not reconciled yet", s.Generation)}
	case s.Artifact == nil || s.Artifact.URL == "":
		return nil, &NotReadyError{Ref: s.Ref(), Message: "it has no artifact yet"}
	case s.Artifact.Revision == "":
		return nil, &NotReadyError{Ref: s.Ref(), Message: "its artifact has no revision"}
	}
	return s.Artifact, nil
}

// NotReadyError reports a source that is missing, not Ready, or without an
// artifact: the Stack waits for it.
type NotReadyError struct {
	Ref     string // "GitRepository infra/fleet"
	Message string
}

func (e *NotReadyError) Error() string { return e.Ref + " is not ready: " + e.Message }
