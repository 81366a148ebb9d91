package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// approval reads the approve annotation and who wrote it from the API server,
// not the cache: an approval is acted on as the API server holds it now.
func (r *StackReconciler) approval(ctx context.Context, stack *v1alpha1.Stack) (value, by string, err error) {
	fresh := &v1alpha1.Stack{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(stack), fresh); err != nil {
		return "", "", fmt.Errorf("read the approval of the Stack: %w", err)
	}
	value = fresh.GetAnnotations()[v1alpha1.ApproveAnnotation]
	if value == "" {
		return "", "", nil
	}
	return value, annotationWriter(fresh.ManagedFields, v1alpha1.ApproveAnnotation), nil
}

// annotationWriter is the manager of the managedFields entry that last wrote
// annotation key (the newest of those that own it), or "unknown" when none
// does (managedFields were stripped).
func annotationWriter(entries []metav1.ManagedFieldsEntry, key string) string {
	by, at := "unknown", time.Time{}
	for _, e := range entries {
		if e.FieldsV1 == nil || !ownsAnnotation(e.FieldsV1.GetRawBytes(), key) {
			continue
		}
		t := time.Time{}
		if e.Time != nil {
			t = e.Time.Time
		}
		if by == "unknown" || !t.Before(at) {
			by, at = e.Manager, t
		}
	}
	return by
}

// ownsAnnotation reads a FieldsV1 set: {"f:metadata":{"f:annotations":{"f:<key>":{}}}}.
func ownsAnnotation(raw []byte, key string) bool {
	var fields struct {
		Metadata struct {
			Annotations map[string]json.RawMessage `json:"f:annotations"`
		} `json:"f:metadata"`
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return false
	}
	_, ok := fields.Metadata.Annotations["f:"+key]
	return ok
}
