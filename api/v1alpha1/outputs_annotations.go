package v1alpha1

// Annotations the controller writes on a Stack's outputs Secret
// (spec.outputs.secretName), so that a reader of the Secret, a downstream
// Stack's configFrom stackOutputs above all, knows what the Secret's data
// alone cannot say.
const (
	// SecretOutputsAnnotation lists the outputs Pulumi marks secret: their
	// names, sorted, comma-separated ("" when none is). A downstream Stack
	// makes them secret config. A Secret without it (published by an older
	// controller) is read as if every output were secret.
	SecretOutputsAnnotation = "stackpilot.dev/secret-outputs"

	// JSONOutputsAnnotation lists the outputs whose value is not a string:
	// the Secret holds them as compact JSON text, strings as they are. Names
	// sorted, comma-separated ("" when none is). Without it a reader can not
	// tell the output "42" from the output 42.
	JSONOutputsAnnotation = "stackpilot.dev/json-outputs"
)

// AdoptOutputsLabel, set on an existing Secret or ConfigMap to the name of a
// Stack in its namespace, lets that Stack take the object over as its outputs
// Secret or ConfigMap: its data is replaced and it is deleted with the Stack.
// Without it a Stack writes only objects it created (that it controls): the
// name in spec.outputs could otherwise be any Secret of the namespace, the
// passphrase Secret included.
const AdoptOutputsLabel = "stackpilot.dev/adopt-outputs"
