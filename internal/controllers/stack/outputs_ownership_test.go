package stack

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestMayWriteOutputs(t *testing.T) {
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: types.UID("u1")}}
	controlledBy := func(kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	tests := []struct {
		name   string
		meta   metav1.ObjectMeta
		refuse string
	}{
		{name: "created by this Stack", meta: metav1.ObjectMeta{OwnerReferences: controlledBy("Stack", "app", "u1")}},
		{name: "labelled for this Stack", meta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.AdoptOutputsLabel: "app"}}},
		{name: "unowned", refuse: "was not created by this Stack"},
		{name: "owned but not controlled",
			meta:   metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "Stack", Name: "app", UID: "u1"}}},
			refuse: "was not created by this Stack"},
		{name: "labelled for another Stack", meta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.AdoptOutputsLabel: "other"}},
			refuse: "label it " + v1alpha1.AdoptOutputsLabel + "=app"},
		{name: "a Stack of the same name, deleted", meta: metav1.ObjectMeta{OwnerReferences: controlledBy("Stack", "app", "u0")},
			refuse: "controlled by Stack app"},
		{name: "controlled by another, labelled", refuse: "controlled by Deployment web",
			meta: metav1.ObjectMeta{OwnerReferences: controlledBy("Deployment", "web", "u2"),
				Labels: map[string]string{v1alpha1.AdoptOutputsLabel: "app"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tt.meta.Name = "target"
			err := mayWriteOutputs(stack, "Secret", &corev1.Secret{ObjectMeta: tt.meta})
			if tt.refuse == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.refuse)))
			g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.OutputsConflictReason))
		})
	}
}
