package receiver

// The Receiver reconciler reads Receivers and their Secrets and writes their
// status; the webhook server patches the reconcile-request annotation of
// the Stacks an event matches (covered by the Stack reconciler's verbs on
// stacks).
//
// +kubebuilder:rbac:groups=stackpilot.dev,resources=receivers,verbs=get;list;watch
// +kubebuilder:rbac:groups=stackpilot.dev,resources=receivers/status,verbs=get;update;patch
