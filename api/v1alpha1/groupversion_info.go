// Package v1alpha1 contains the API types of the stackpilot.dev group, version
// v1alpha1: the Stack kind.
//
// +kubebuilder:object:generate=true
// +groupName=stackpilot.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "stackpilot.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this package to a runtime.Scheme.
	// It is apimachinery's builder, so that importing the API pulls in no
	// controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Stack{}, &StackList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
