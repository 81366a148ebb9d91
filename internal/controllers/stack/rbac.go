package stack

// RBAC of the controller, rendered by `make manifests` into
// config/rbac/role.yaml (ClusterRole stackpilot-manager-role). The leader-election
// lease is granted by the namespaced Role in config/rbac/leader_election_role.yaml.

// +kubebuilder:rbac:groups=stackpilot.dev,resources=stacks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=stackpilot.dev,resources=stacks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=stackpilot.dev,resources=stacks/finalizers,verbs=update
// Secrets and ConfigMaps: read as inputs (uncached gets; their metadata
// watched), and the outputs objects created and replaced whole (step_outputs.go).
// Nothing of the controller patches or deletes them: the garbage collector
// removes the outputs objects with their Stack (owner references), so neither
// verb is granted.
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// finalize asks whether a Stack's namespace is being deleted (read uncached: no namespace informer).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// Tenancy: check that a Stack's ServiceAccount exists, and request a short-lived
// token for it per operation (inputs.Tenancy).
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// Flux sources a Stack follows (spec.source.sourceRef): read and watched for new artifacts.
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets;externalartifacts,verbs=get;list;watch
