package source

import (
	"context"
	"fmt"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
)

// fakeKind is selected by Stacks whose source sets OCI.
type fakeKind struct{ name string }

func (k fakeKind) Selected(s *v1alpha1.Stack) bool { return s.Spec.Source.OCI != nil }
func (k fakeKind) Resolve(context.Context, *v1alpha1.Stack, ResolveRequest) (Resolved, error) {
	return Resolved{}, nil
}
func (k fakeKind) FetchRevision(context.Context, *v1alpha1.Stack, string) (artifact.Artifact, error) {
	return artifact.Artifact{}, nil
}
func (k fakeKind) Secrets(*v1alpha1.Stack) []string { return nil }
func (k fakeKind) Watch(_ context.Context, _ ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	return b, nil
}
func (k fakeKind) Hints() Hints { return Hints{} }

func TestKindsOf(t *testing.T) {
	kinds := Kinds{fakeKind{"oci"}}
	if k := kinds.Of(&v1alpha1.Stack{}); k != nil {
		t.Fatalf("a Stack without a source has no kind, got %v", k)
	}
	s := &v1alpha1.Stack{Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{OCI: &v1alpha1.OCISource{}}}}
	if k := kinds.Of(s); k != (fakeKind{"oci"}) {
		t.Fatalf("want the oci kind, got %v", k)
	}
}

func TestLimitFlag(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", &artifact.LimitError{Limit: "file count", Max: 1, Of: "tree"}): "--artifact-max-files",
		fmt.Errorf("x: %w", &artifact.LimitError{Limit: "size", Max: 1, Of: "tree"}):       "--artifact-max-size",
		fmt.Errorf("anything else"): "--artifact-max-size",
	} {
		if got := LimitFlag(err); got != want {
			t.Errorf("%v: got %s, want %s", err, got, want)
		}
	}
}
