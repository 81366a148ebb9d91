package stack

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestAnnotationWriter(t *testing.T) {
	g := NewWithT(t)
	at := func(s int) *metav1.Time { return &metav1.Time{Time: metav1.Now().Add(-secs(s))} }
	entry := func(manager string, t *metav1.Time, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: t, FieldsV1: metav1.NewFieldsV1(raw)}
	}
	approve := `{"f:metadata":{"f:annotations":{".":{},"f:stackpilot.dev/approve":{}}}}`
	other := `{"f:metadata":{"f:annotations":{"f:other":{}}}}`
	g.Expect(annotationWriter(nil, v1alpha1.ApproveAnnotation)).To(Equal("unknown"))
	g.Expect(annotationWriter([]metav1.ManagedFieldsEntry{
		entry("kubectl-annotate", at(60), approve),
		entry("alice-apply", at(5), approve),
		entry("stackpilot-controller", at(1), other),
	}, v1alpha1.ApproveAnnotation)).To(Equal("alice-apply"), "the newest writer of that annotation")
}

func secs(s int) time.Duration { return time.Duration(s) * time.Second }
