// Package v1alpha1 contains the API types of the stackpilot.dev group, version
// v1alpha1: the Stack kind.
//
// +kubebuilder:object:generate=true
// +groupName=stackpilot.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "stackpilot.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this package to a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
