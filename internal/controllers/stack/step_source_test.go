package stack

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestRequestedResolve(t *testing.T) {
	stack := func(v string) *v1alpha1.Stack {
		s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{}}
		if v != "" {
			s.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: v}
		}
		return s
	}
	r := &StackReconciler{}
	if req := r.resolveRequest(stack("")); req.Requested || !req.RequestedAt.IsZero() {
		t.Fatal("no request, no fresh resolution")
	}
	handled := stack("x")
	handled.Status.LastHandledReconcileAt = "x"
	if req := r.resolveRequest(handled); req.Requested || !req.RequestedAt.IsZero() {
		t.Fatal("a handled request is no request")
	}
	for v, want := range map[string]bool{
		time.Now().UTC().Format(time.RFC3339Nano):                 true,
		time.Now().Format(time.RFC3339Nano):                       true,
		time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano): false, // stale: not trusted
		"1700000000":                 false,
		"drift-2026-01-01T00:00:00Z": false,
	} {
		req := r.resolveRequest(stack(v))
		if !req.Requested {
			t.Fatalf("%q: want a request", v)
		}
		if got := !req.RequestedAt.IsZero(); got != want {
			t.Errorf("%q: shared resolution = %v, want %v", v, got, want)
		}
		if _, got := requestStamp(stack(v)); got != want {
			t.Errorf("%q: shared listing = %v, want %v", v, got, want)
		}
	}
}
