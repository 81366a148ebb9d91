package stack

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// mayWriteOutputs says whether a Stack may replace the data of an existing
// object named in its spec.outputs. Only two kinds of object are its to
// write: one it controls (it created it, or adopted it before), and one that
// a person labelled for it (v1alpha1.AdoptOutputsLabel = the Stack's name).
// Anything else is refused, whatever its owners: a name in spec.outputs may
// be any Secret of the namespace (the passphrase Secret, a registry
// credential), and adopting it would both overwrite it and hand it to the
// garbage collector with the Stack.
func mayWriteOutputs(stack *v1alpha1.Stack, kind string, obj metav1.Object) error {
	owner := metav1.GetControllerOf(obj)
	if owner != nil && owner.UID == stack.UID {
		return nil
	}
	if owner != nil {
		return transient(v1alpha1.OutputsConflictReason, fmt.Errorf(
			"the outputs %s %s is controlled by %s %s, not by this Stack: name another object in spec.outputs, or delete that one",
			kind, obj.GetName(), owner.Kind, owner.Name))
	}
	if obj.GetLabels()[v1alpha1.AdoptOutputsLabel] == stack.Name {
		return nil
	}
	return transient(v1alpha1.OutputsConflictReason, fmt.Errorf(
		"the outputs %s %s exists and was not created by this Stack; it is left as it is: name another object in spec.outputs, "+
			"or label it %s=%s to let this Stack replace its data and delete it with the Stack",
		kind, obj.GetName(), v1alpha1.AdoptOutputsLabel, stack.Name))
}
