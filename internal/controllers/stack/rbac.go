package stack

// RBAC of the controller, rendered by `make manifests` into
// config/rbac/role.yaml (ClusterRole stackpilot-manager-role). The leader-election
// lease is granted by the namespaced Role in config/rbac/leader_election_role.yaml.

// +kubebuilder:rbac:groups=stackpilot.dev,resources=stacks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=stackpilot.dev,resources=stacks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=stackpilot.dev,resources=stacks/finalizers,verbs=update
// Secrets and ConfigMaps: read as inputs (uncached gets; their metadata
// watched), and the outputs objects created and replaced whole (step_outputs.go).
// The garbage collector removes the outputs objects with their Stack (owner
// references).
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch;create;update
// The Job executor: each operation's Secret (its secret inputs and
// credential, owned by the Job) is created, patched with the Job as its owner
// and deleted once the operation ends, in the Stack's namespace.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=patch;delete
// One Job per operation in the Stack's namespace: created, watched for its
// end, adopted after a restart, deleted on cancel (its Pod gets SIGTERM).
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// The runner Pods: watched for why they fail (an image that does not pull, a
// Pod pending past its deadline, an eviction) and whether a lock's holder is
// gone; their log read when the runner could not report.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// finalize asks whether a Stack's namespace is being deleted (read uncached: no namespace informer).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// Tenancy: check that a Stack's ServiceAccount exists, and request a short-lived
// token for it per operation (inputs.Tenancy).
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// Flux sources a Stack follows (spec.source.sourceRef): read and watched for new artifacts.
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets;externalartifacts,verbs=get;list;watch
