package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxcd/pkg/apis/meta"
)

// StackKind is the kind name of Stack objects.
const StackKind = "Stack"

// StackSpec is the desired state of a Stack: which Pulumi program, which stack
// in which backend, with which inputs, and how often to reconcile.
type StackSpec struct {
	// Source is where the Pulumi program comes from.
	// +required
	Source StackSource `json:"source"`

	// StackName is the Pulumi stack name: "dev", "org/dev" or "org/project/dev".
	// Defaults to the Stack's metadata.name.
	// +kubebuilder:validation:MaxLength=400
	// +kubebuilder:validation:XValidation:rule="self.matches('^([A-Za-z0-9_.-]+/){0,2}[A-Za-z0-9_.-]{1,100}$')",message="stackName must be a Pulumi stack name: up to 100 letters, digits, '-', '_' or '.', optionally prefixed by 'org/' or 'org/project/'"
	// +optional
	StackName string `json:"stackName,omitempty"`

	// Backend is the Pulumi state backend URL (file://, s3://, azblob://, gs://,
	// postgres://, https://api.pulumi.com, ...). Defaults to the controller's
	// --default-backend: a per-namespace file:// folder under its data dir.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9+.-]*://')",message="backend must be a URL with a scheme, such as file:///path, s3://bucket or https://api.pulumi.com"
	// +optional
	Backend string `json:"backend,omitempty"`

	// BackendSecretRef names a Secret in the Stack's namespace whose keys are set
	// as environment variables for Pulumi, for the backend's credentials
	// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, PULUMI_ACCESS_TOKEN, ...).
	// +optional
	BackendSecretRef *LocalObjectReference `json:"backendSecretRef,omitempty"`

	// ServiceAccountName is the ServiceAccount, in the Stack's namespace, that the
	// program acts as on this cluster: each operation's kubeconfig carries a
	// short-lived token for it. Defaults to the controller's
	// --default-service-account; when neither is set the program acts as the
	// controller itself.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Runner says where and how operations run: the executor (Local or Job)
	// and, for Job, the runner Pod's image, resources and template.
	// +optional
	Runner *RunnerSpec `json:"runner,omitempty"`

	// SecretsProvider is how Pulumi encrypts the stack's secrets. When absent, the
	// passphrase comes from the Secret named by the controller's
	// --default-passphrase-secret flag, in the Stack's namespace.
	// +optional
	SecretsProvider *SecretsProvider `json:"secretsProvider,omitempty"`

	// Config is the stack's configuration. A key is "name" (in the project's
	// namespace) or "namespace:name" (for example "aws:region"); a value is any
	// JSON value: string, number, bool, object or array. (Keys are checked by the
	// controller, not at admission: the API server cannot run CEL rules over a map
	// of schemaless values.)
	// +kubebuilder:validation:MaxProperties=1000
	// +optional
	Config map[string]apiextensionsv1.JSON `json:"config,omitempty"`

	// ConfigFrom adds configuration from ConfigMaps and Secrets in the Stack's
	// namespace: each data key becomes a config key. Values from Secrets are
	// Pulumi secrets. Entries are applied in order, then Config; a later value
	// for the same key wins.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	ConfigFrom []ConfigFromSource `json:"configFrom,omitempty"`

	// EnvFrom sets environment variables for Pulumi from ConfigMaps and Secrets
	// in the Stack's namespace, like a container's envFrom.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	EnvFrom []EnvFromSource `json:"envFrom,omitempty"`

	// Interval is how often the Stack is reconciled: the source checked for a
	// new revision and the inputs for changes.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') || duration(self) >= duration('1s')",message="interval must be at least 1s"
	Interval metav1.Duration `json:"interval,omitzero"`

	// RetryInterval is the wait before retrying after a failure; repeated
	// failures (status.failures) back off from it. A new revision or new inputs
	// are acted on at once, without waiting out the backoff.
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') || duration(self) >= duration('1s')",message="retryInterval must be at least 1s"
	// +optional
	RetryInterval *metav1.Duration `json:"retryInterval,omitempty"`

	// Timeout bounds one Pulumi operation; past it the operation is cancelled.
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') || duration(self) >= duration('1s')",message="timeout must be at least 1s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Suspend stops reconciling: no source checks and no new operations until it
	// is set back to false.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Refresh runs a refresh (read the real state of every resource) before each
	// up, so that changes made outside Pulumi are taken into account.
	// +optional
	Refresh bool `json:"refresh,omitempty"`

	// Targets limits operations to these resource URNs (and, for up, their
	// dependencies as Pulumi decides). Empty means the whole stack.
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern="^urn:pulumi:"
	// +listType=set
	// +optional
	Targets []string `json:"targets,omitempty"`

	// DestroyOnDelete destroys the stack's resources when the Stack is deleted.
	// When false (the default) the resources and the stack's state are left as
	// they are.
	// +optional
	DestroyOnDelete bool `json:"destroyOnDelete,omitempty"`

	// Outputs publishes the stack's outputs to a Secret and/or a ConfigMap in the
	// Stack's namespace, for other tools to consume.
	// +optional
	Outputs *OutputsTarget `json:"outputs,omitempty"`

	// DriftDetection checks, on a schedule, whether the stack's resources
	// still match what the last apply left, and reports (Detect) or repairs
	// (Remediate) what changed outside the program.
	// +kubebuilder:default={"mode":"Detect","interval":"1h"}
	// +optional
	DriftDetection *DriftDetection `json:"driftDetection,omitempty"`

	// Approval says whether a change is applied at once (Auto, the default),
	// after a person approves its plan (Manual), or never (PreviewOnly).
	// +optional
	Approval *Approval `json:"approval,omitempty"`

	// DependsOn lists Stacks that must be Ready at their latest generation,
	// with nothing pending, before this Stack runs an up.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	DependsOn []DependencyReference `json:"dependsOn,omitempty"`

	// Rollback re-applies the last applied revision and inputs when an up of
	// a new revision or new inputs fails.
	// +optional
	Rollback *Rollback `json:"rollback,omitempty"`

	// PolicyPacks are Pulumi policy packs (CrossGuard) the engine runs in
	// every up and preview of the Stack (`--policy-pack`), beside the
	// StackPolicies and ClusterStackPolicies that select it. A pack runs in
	// its language's runtime, so the runner's image must have
	// `pulumi-language-<runtime>` and the pack's dependencies: the Job
	// executor with spec.runner.image (for example pulumi/pulumi-nodejs for
	// a TypeScript pack whose node_modules are installed). Where a pack
	// cannot be fetched or the image cannot run it, the operation fails with
	// PolicyPackFailed, naming the pack, its runtime and what to change,
	// before the engine starts: a pack is never skipped.
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=name
	// +optional
	PolicyPacks []PolicyPack `json:"policyPacks,omitempty"`

	// Previews previews pull requests that change the program and posts
	// what they would do back to each pull request.
	// +optional
	Previews *Previews `json:"previews,omitempty"`
}

// PolicyPack is a Pulumi policy pack and where it comes from.
type PolicyPack struct {
	// Name names the pack in this list and in messages.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// Source is where the pack comes from, as a Stack's program does: git,
	// oci or sourceRef, and dir, the folder holding PulumiPolicy.yaml
	// (git.include is not used). It is fetched at each up and preview: a
	// new revision of the pack applies from the next operation on.
	// +required
	Source StackSource `json:"source"`

	// Config is the pack's configuration, as `pulumi up
	// --policy-pack-config` reads it: an object by policy name, each with
	// enforcementLevel and the policy's own properties. It holds no secret:
	// it is passed as it is.
	// +optional
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
}

// StackSource says where the Pulumi program comes from. Exactly one source kind
// is set: git, oci or sourceRef.
// +kubebuilder:validation:XValidation:rule="[has(self.git), has(self.oci), has(self.sourceRef)].exists_one(b, b)",message="exactly one source kind must be set: git, oci or sourceRef"
type StackSource struct {
	// Git fetches the program from a Git repository.
	// +optional
	Git *GitSource `json:"git,omitempty"`

	// OCI fetches the program from an OCI artifact in a container registry,
	// in Flux's format (`stackpilot artifact push`, `flux push artifact`) or
	// any image whose chosen layer is a tar of the program.
	// +optional
	OCI *OCISource `json:"oci,omitempty"`

	// SourceRef follows a Flux source (source.toolkit.fluxcd.io/v1): the
	// artifact its source-controller publishes in .status.artifact.
	// +optional
	SourceRef *FluxSourceReference `json:"sourceRef,omitempty"`

	// Dir is the path of the Pulumi project (the folder holding Pulumi.yaml)
	// inside the fetched tree. Relative, without '..' segments. Empty means the root.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="dir must be a relative path without '..' segments"
	// +optional
	Dir string `json:"dir,omitempty"`
}

// GitSource is a Git repository and the reference to check out.
type GitSource struct {
	// URL of the repository: http://, https://, ssh:// or scp-like user@host:path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh)://[^/]+') || self.matches('^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:.+$')",message="url must start with http://, https:// or ssh://, or be scp-like user@host:path"
	// +required
	URL string `json:"url"`

	// Ref is the branch, tag, semver range or commit to check out. When absent,
	// the remote's default branch (what its HEAD points to) is used.
	// +optional
	Ref *GitRef `json:"ref,omitempty"`

	// SecretRef names a Secret in the Stack's namespace with the credentials:
	// "username" and "password" (HTTP basic auth), or "bearerToken" (HTTP), or
	// "identity" (an SSH private key) and "known_hosts" (SSH).
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Include lists more paths of the repository, files or folders, that the
	// program depends on besides spec.source.dir (for example "shared/"). A
	// new commit runs an up only when the content under spec.source.dir or
	// under one of these paths changed (status.lastAppliedProgramDigest); a
	// commit that changes neither is recorded and skipped. Relative to the
	// repository root, without '..' segments. Every path must exist in each
	// revision.
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="include paths must be relative to the repository root, without '..' segments"
	// +listType=set
	// +optional
	Include []string `json:"include,omitempty"`
}

// FluxSourceReference names a Flux source object.
type FluxSourceReference struct {
	// Kind of the source, in the API group source.toolkit.fluxcd.io (v1).
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket;ExternalArtifact
	// +required
	Kind string `json:"kind"`

	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Namespace of the source; the Stack's own when empty. Another namespace
	// is refused unless the controller runs with --allow-cross-namespace-refs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// OCISource is an OCI repository and the artifact to pull from it.
type OCISource struct {
	// URL of the repository: oci://host[:port]/path, without a tag or digest
	// (those go in ref).
	// +kubebuilder:validation:MinLength=7
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^oci://[^/@]+/[^:@]+$')",message="url must be oci://host[:port]/repository, without a tag or digest (put those in spec.source.oci.ref)"
	// +required
	URL string `json:"url"`

	// Ref is the tag, semver range or digest to pull. When absent, the tag
	// "latest" is used.
	// +optional
	Ref *OCIRef `json:"ref,omitempty"`

	// SecretRef names a Secret of type kubernetes.io/dockerconfigjson in the
	// Stack's namespace with the registry credentials, as for image pulls.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Insecure allows plain HTTP to the registry. Only for registries on a
	// trusted network, such as a registry on loopback in tests.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// Verify checks the artifact's signature before anything is extracted or
	// cached; an artifact that does not verify is never applied.
	// +optional
	Verify *OCIVerification `json:"verify,omitempty"`

	// LayerSelector chooses the layer that holds the program. When absent,
	// the layer of Flux's content type
	// (application/vnd.cncf.flux.content.v1.tar+gzip) is used.
	// +optional
	LayerSelector *OCILayerSelector `json:"layerSelector,omitempty"`
}

// OCIRef selects the artifact. At most one field is set; none means the tag
// "latest".
// +kubebuilder:validation:XValidation:rule="(has(self.tag) ? 1 : 0) + (has(self.semver) ? 1 : 0) + (has(self.digest) ? 1 : 0) <= 1",message="at most one of tag, semver or digest may be set"
type OCIRef struct {
	// Tag to follow: pushing the tag again is a new revision.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern="^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
	// +optional
	Tag string `json:"tag,omitempty"`

	// SemVer is a semver range (for example ">=1.2.0 <2.0.0"); the highest
	// matching tag is pulled.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	SemVer string `json:"semver,omitempty"`

	// Digest pins one manifest ("sha256:<64 hex>"); it never moves.
	// +kubebuilder:validation:Pattern="^sha256:[0-9a-f]{64}$"
	// +optional
	Digest string `json:"digest,omitempty"`
}

// OCIVerification says how to verify an artifact's signature.
type OCIVerification struct {
	// Provider of the signatures. Only cosign (key-based, offline) for now.
	// +kubebuilder:validation:Enum=cosign
	// +kubebuilder:default=cosign
	// +optional
	Provider string `json:"provider,omitempty"`

	// SecretRef names a Secret in the Stack's namespace whose keys ending in
	// ".pub" hold cosign public keys (PEM); a signature that verifies with any
	// of them is accepted.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// OCILayerSelector chooses a layer by media type.
type OCILayerSelector struct {
	// MediaType of the layer: the first layer of this type is extracted. Any
	// tar or tar+gzip layer works, so a program baked into an image with a
	// Dockerfile can be used
	// (application/vnd.oci.image.layer.v1.tar+gzip).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +required
	MediaType string `json:"mediaType"`
}

// GitRef selects what to check out. At most one field is set; none means the
// remote's default branch.
// +kubebuilder:validation:XValidation:rule="(has(self.branch) ? 1 : 0) + (has(self.tag) ? 1 : 0) + (has(self.semver) ? 1 : 0) + (has(self.commit) ? 1 : 0) <= 1",message="at most one of branch, tag, semver or commit may be set"
type GitRef struct {
	// Branch to follow: each new commit on it is a new revision.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Branch string `json:"branch,omitempty"`

	// Tag to check out.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Tag string `json:"tag,omitempty"`

	// SemVer is a semver range (for example ">=1.2.0 <2.0.0"); the highest
	// matching tag is checked out.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	SemVer string `json:"semver,omitempty"`

	// Commit is a full commit hash (40 hex digits for SHA-1, 64 for SHA-256).
	// +kubebuilder:validation:Pattern="^([0-9a-f]{40}|[0-9a-f]{64})$"
	// +optional
	Commit string `json:"commit,omitempty"`
}

// LocalObjectReference names an object in the Stack's namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +required
	Name string `json:"name"`
}

// OptionalObjectReference names a ConfigMap or Secret in the Stack's namespace
// that may be allowed to be missing.
type OptionalObjectReference struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +required
	Name string `json:"name"`

	// Optional lets the object (or a requested key) be missing: it then
	// contributes nothing instead of failing the reconcile.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// SecretKeyRef names one key of a Secret in the Stack's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +required
	Name string `json:"name"`

	// Key in the Secret.
	// +kubebuilder:default=passphrase
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[-._a-zA-Z0-9]+$"
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretsProvider is how Pulumi encrypts the stack's secrets. Exactly one kind
// is set; passphraseSecretRef is the only kind for now.
// +kubebuilder:validation:XValidation:rule="[has(self.passphraseSecretRef)].exists_one(b, b)",message="exactly one secrets provider must be set: passphraseSecretRef"
type SecretsProvider struct {
	// PassphraseSecretRef selects the Secret key holding the passphrase of
	// Pulumi's passphrase secrets provider (PULUMI_CONFIG_PASSPHRASE).
	// +optional
	PassphraseSecretRef *SecretKeyRef `json:"passphraseSecretRef,omitempty"`
}

// ConfigFromSource adds the data of a ConfigMap or a Secret to the stack's
// configuration, or another Stack's outputs. Exactly one of configMapRef,
// secretRef and stackOutputs is set.
// +kubebuilder:validation:XValidation:rule="[has(self.configMapRef), has(self.secretRef), has(self.stackOutputs)].exists_one(b, b)",message="exactly one of configMapRef, secretRef or stackOutputs must be set"
type ConfigFromSource struct {
	// ConfigMapRef names a ConfigMap; its values are plain config values.
	// +optional
	ConfigMapRef *OptionalObjectReference `json:"configMapRef,omitempty"`

	// SecretRef names a Secret; its values are Pulumi secrets.
	// +optional
	SecretRef *OptionalObjectReference `json:"secretRef,omitempty"`

	// StackOutputs names another Stack whose outputs become config values
	// (secret outputs stay secret). A change of those outputs re-applies this
	// Stack: they are part of its inputs.
	// +optional
	StackOutputs *StackOutputsReference `json:"stackOutputs,omitempty"`

	// Keys limits which data keys are used. Empty means all of them. A listed key
	// that is missing fails the reconcile unless the reference is optional.
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern="^[-._a-zA-Z0-9]+$"
	// +listType=set
	// +optional
	Keys []string `json:"keys,omitempty"`
}

// EnvFromSource sets environment variables from a ConfigMap or a Secret: each
// data key, with Prefix in front, is a variable. It has the shape of a
// container's envFrom entry. Exactly one of configMapRef and secretRef is set.
// +kubebuilder:validation:XValidation:rule="has(self.configMapRef) != has(self.secretRef)",message="exactly one of configMapRef or secretRef must be set"
type EnvFromSource struct {
	// Prefix is put in front of every key.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern="^[A-Za-z_][A-Za-z0-9_]*$"
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// ConfigMapRef names a ConfigMap.
	// +optional
	ConfigMapRef *OptionalObjectReference `json:"configMapRef,omitempty"`

	// SecretRef names a Secret.
	// +optional
	SecretRef *OptionalObjectReference `json:"secretRef,omitempty"`
}

// OutputsTarget names the objects, in the Stack's namespace, that the stack's
// outputs are published to. At least one is set.
// +kubebuilder:validation:XValidation:rule="has(self.secretName) || has(self.configMapName)",message="at least one of secretName or configMapName must be set"
type OutputsTarget struct {
	// SecretName is a Secret that receives every output, secret or not.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// ConfigMapName is a ConfigMap that receives the outputs that are not secret.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
}

// StackStatus is the observed state of a Stack.
type StackStatus struct {
	// ObservedGeneration is the last metadata.generation the controller acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, OutputsPublished, Drifted,
	// PlanPending.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastHandledReconcileAt is the last value of the reconcile-request
	// annotation that the controller handled.
	meta.ReconcileRequestStatus `json:",inline"`

	// LastAttemptedRevision is the source revision of the last operation
	// started, whatever its outcome: "<branch-or-tag>@sha1:<commit>".
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// LastAppliedRevision is the source revision of the last successful up, or
	// of a later revision that changed nothing under the program's paths
	// (its up was skipped: see lastAppliedProgramDigest).
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`

	// InputsDigest is the digest ("hmac-sha256:<hex>", keyed by the controller's
	// digest key Secret) of the inputs (resolved config, environment, stack,
	// backend, targets) of the last successful up.
	// +optional
	InputsDigest string `json:"inputsDigest,omitempty"`

	// LastAttemptedInputsDigest is the digest of the inputs of the last
	// operation started, whatever its outcome.
	// +optional
	LastAttemptedInputsDigest string `json:"lastAttemptedInputsDigest,omitempty"`

	// LastAppliedProgramDigest is the digest ("sha256:<hex>") of the program
	// the last successful up applied: the content of spec.source.dir and of
	// each spec.source.git.include path, with file modes and symbolic links.
	// A new revision whose program digest equals it (and whose inputs are
	// unchanged) runs no up: lastAppliedRevision moves to it and the skip is
	// recorded once in status.history.
	// +optional
	LastAppliedProgramDigest string `json:"lastAppliedProgramDigest,omitempty"`

	// LastAttemptedProgramDigest is the program digest of the last operation
	// started, whatever its outcome. A failed attempt is retried with backoff
	// until the program digest or the inputs change, not the revision.
	// +optional
	LastAttemptedProgramDigest string `json:"lastAttemptedProgramDigest,omitempty"`

	// LastAppliedArtifact is the cached program tree of the last successful up;
	// a destroy on deletion uses it when the source is gone.
	// +optional
	LastAppliedArtifact *ArtifactReference `json:"lastAppliedArtifact,omitempty"`

	// Policy is what the StackPolicies and ClusterStackPolicies that select
	// the Stack found at its last up or preview; absent when none selects it.
	// +optional
	Policy *StackPolicyStatus `json:"policy,omitempty"`

	// LastAttemptedArtifact is the program tree of the last up started, whatever
	// its outcome. An up that failed part-way may have created resources, so a
	// destroy on deletion uses it when no up ever succeeded.
	// +optional
	LastAttemptedArtifact *ArtifactReference `json:"lastAttemptedArtifact,omitempty"`

	// AppliedStack is the Pulumi stack (backend and stack name) this Stack has
	// applied to. Once set, a change of spec.backend or spec.stackName (or of the
	// default backend it resolves to) is refused: the state must be moved first.
	// +optional
	AppliedStack *AppliedStack `json:"appliedStack,omitempty"`

	// Failures counts consecutive failed attempts; it drives the retry backoff
	// and goes back to 0 on success or on a new revision or new inputs.
	// +optional
	Failures int64 `json:"failures,omitempty"`

	// CurrentOperation is set while an operation runs. One found when the
	// controller starts was interrupted.
	// +optional
	CurrentOperation *OperationRecord `json:"currentOperation,omitempty"`

	// Outputs are the stack's outputs after the last successful up: each value
	// as compact JSON text, or "[secret]" for a secret output. Bounded: a value
	// over 1 KiB, or past a 16 KiB budget, shows as "[omitted: <size>; ...]",
	// and outputs past the first 100 (by name) are only counted in
	// outputsOmitted. The outputs Secret and ConfigMap carry every value.
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 1024)",message="status.outputs: keys are at most 253 and values at most 1024 characters"
	// +optional
	Outputs map[string]string `json:"outputs,omitempty"`

	// OutputsOmitted counts the outputs left out of status.outputs because it
	// holds at most 100; the outputs Secret and ConfigMap carry them.
	// +optional
	OutputsOmitted int64 `json:"outputsOmitted,omitempty"`

	// OutputsPublishFailures counts consecutive failed attempts to write the
	// outputs Secret and ConfigMap (condition OutputsPublished=False); it
	// drives the publish retry's backoff, from retryInterval doubling up to
	// interval, and goes back to 0 when a publish succeeds.
	// +optional
	OutputsPublishFailures int64 `json:"outputsPublishFailures,omitempty"`

	// LastOutputsPublishAttempt is when the last failed publish was attempted;
	// the next retry is due a backoff after it.
	// +optional
	LastOutputsPublishAttempt *metav1.Time `json:"lastOutputsPublishAttempt,omitempty"`

	// Drift is what the last drift check found, and when the next is due.
	// +optional
	Drift *DriftStatus `json:"drift,omitempty"`

	// PendingPlan is the previewed change that waits for approval
	// (spec.approval.mode Manual) or is only shown (PreviewOnly).
	// +optional
	PendingPlan *PendingPlan `json:"pendingPlan,omitempty"`

	// Rollback is the last automatic rollback (spec.rollback).
	// +optional
	Rollback *RollbackStatus `json:"rollback,omitempty"`

	// Previews are the previews of the open pull requests
	// (spec.previews), by number.
	// +kubebuilder:validation:MaxItems=50
	// +listType=map
	// +listMapKey=number
	// +optional
	Previews []PullRequestPreview `json:"previews,omitempty"`

	// RevisionPreview answers the last on-demand preview of a revision
	// (`stackpilot preview STACK --revision REF`).
	// +optional
	RevisionPreview *RevisionPreview `json:"revisionPreview,omitempty"`

	// History lists the last operations, newest first, at most MaxHistory (10).
	// +kubebuilder:validation:MaxItems=10
	// +optional
	History []OperationRecord `json:"history,omitempty"`
}

// AppliedStack names the Pulumi stack a Stack owns.
type AppliedStack struct {
	// Backend is the state backend URL, without credentials.
	// +kubebuilder:validation:MaxLength=2048
	// +required
	Backend string `json:"backend"`

	// StackName is the Pulumi stack name.
	// +kubebuilder:validation:MaxLength=400
	// +required
	StackName string `json:"stackName"`
}

// ArtifactReference identifies a program tree in the controller's artifact cache.
type ArtifactReference struct {
	// Revision is the source revision the tree was fetched at.
	// +required
	Revision string `json:"revision"`

	// Digest is the content digest of the tree, "sha256:<hex>".
	// +required
	Digest string `json:"digest"`
}

// OperationType names a Pulumi operation.
// +kubebuilder:validation:Enum=preview;up;refresh;destroy;drift-check;remediate;rollback
type OperationType string

const (
	OperationPreview    OperationType = "preview"
	OperationUp         OperationType = "up"
	OperationRefresh    OperationType = "refresh"
	OperationDestroy    OperationType = "destroy"
	OperationDriftCheck OperationType = "drift-check"
	// OperationRemediate is `pulumi up --refresh` at the last applied
	// revision and inputs, after a drift check found drift.
	OperationRemediate OperationType = "remediate"
	// OperationRollback is `pulumi up` at the last applied revision and
	// inputs, after an up of a newer change failed (spec.rollback).
	OperationRollback OperationType = "rollback"
)

// OperationOutcome is how an operation ended, or "running".
// +kubebuilder:validation:Enum=succeeded;failed;conflict;cancelled;interrupted;running;skipped
type OperationOutcome string

const (
	// OutcomeSucceeded: the operation completed.
	OutcomeSucceeded OperationOutcome = "succeeded"
	// OutcomeFailed: the operation failed; the message says why.
	OutcomeFailed OperationOutcome = "failed"
	// OutcomeConflict: another update held the stack's lock.
	OutcomeConflict OperationOutcome = "conflict"
	// OutcomeCancelled: the operation was cancelled before it finished.
	OutcomeCancelled OperationOutcome = "cancelled"
	// OutcomeInterrupted: the controller stopped while the operation ran.
	OutcomeInterrupted OperationOutcome = "interrupted"
	// OutcomeRunning: the operation is under way (status.currentOperation).
	OutcomeRunning OperationOutcome = "running"
	// OutcomeSkipped: a new revision changed nothing under the program's
	// paths (spec.source.dir and spec.source.git.include), so no up ran; it
	// is recorded once per revision.
	OutcomeSkipped OperationOutcome = "skipped"
)

// OperationRecord describes one Pulumi operation.
type OperationRecord struct {
	// ID identifies the operation; the same ID is in the runner's logs and events.
	// +required
	ID string `json:"id"`

	// Type of the operation.
	// +required
	Type OperationType `json:"type"`

	// Revision of the source the operation ran at.
	// +optional
	Revision string `json:"revision,omitempty"`

	// StartedAt is when the operation started.
	// +required
	StartedAt metav1.Time `json:"startedAt"`

	// FinishedAt is when the operation ended; unset while it runs.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// Outcome of the operation.
	// +required
	Outcome OperationOutcome `json:"outcome"`

	// Changes counts the resources the operation changed (or, for a preview or a
	// drift check, would change).
	// +optional
	Changes *ChangeSummary `json:"changes,omitempty"`

	// Message is a short human summary; for a failure, what went wrong.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Message string `json:"message,omitempty"`

	// Resources are the URNs of the resources a remediate restored (or a
	// drift check found drifted), at most 20.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Resources []string `json:"resources,omitempty"`

	// Plan is the id of the plan the operation made (a preview) or applied
	// (an up of an approved plan).
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Plan string `json:"plan,omitempty"`

	// ApprovedBy is who approved the plan an up applied: the last writer of
	// the stackpilot.dev/approve annotation (its managedFields manager).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ApprovedBy string `json:"approvedBy,omitempty"`

	// Host is the host name of the controller that ran the operation (in a Pod,
	// the Pod's name; with host networking, the node's). A lock the operation
	// left behind is cleared only when it carries this host name and its
	// process is provably gone.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Host string `json:"host,omitempty"`

	// Shard is the --watch-label-selector of the controller that started the
	// operation, empty for an unsharded one. A Stack relabelled to another
	// shard while the operation runs is left to that controller until the
	// operation ends (docs/guide/sharding.md).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Shard string `json:"shard,omitempty"`

	// Reason classifies an operation that did not succeed with the Ready
	// condition's reason for it (ProgramError, AuthenticationFailed,
	// BackendFailed, Locked, Timeout, Interrupted, StackClaimed,
	// OperationFailed); empty when
	// it succeeded or still runs.
	// +optional
	Reason string `json:"reason,omitempty"`

	// DependencyCache says how a Job operation's Pod got the program's
	// dependencies: hit (restored from the dependency cache of the Stack's
	// namespace, no package manager ran), miss (installed from the
	// lockfile, then offered to the cache); empty when there was nothing to
	// install (a YAML program, no lockfile, dependencies already in the
	// source) or the Local executor ran it.
	// +kubebuilder:validation:Enum=hit;miss
	// +optional
	DependencyCache DependencyCacheResult `json:"dependencyCache,omitempty"`
}

// DependencyCacheResult is what an operation's Pod found in the dependency
// cache.
type DependencyCacheResult string

const (
	DependencyCacheHit  DependencyCacheResult = "hit"
	DependencyCacheMiss DependencyCacheResult = "miss"
)

// ChangeSummary counts resources by the step Pulumi took for them.
type ChangeSummary struct {
	// +optional
	Create int64 `json:"create,omitempty"`
	// +optional
	Update int64 `json:"update,omitempty"`
	// +optional
	Replace int64 `json:"replace,omitempty"`
	// +optional
	Delete int64 `json:"delete,omitempty"`
}

// Stack is a Pulumi stack continuously delivered from a source.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=stk,categories=stackpilot
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message",description=""
// +kubebuilder:printcolumn:name="Revision",type="string",JSONPath=".status.lastAppliedRevision",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:validation:XValidation:rule="has(self.spec.stackName) || size(self.metadata.name) <= 100",message="metadata.name is longer than a Pulumi stack name may be (100 characters): set spec.stackName"
type Stack struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec StackSpec `json:"spec"`
	// Status starts with observedGeneration -1, as Flux's kinds do: kstatus
	// reads an object without status as Current, so a Kustomization waiting
	// on a new Stack would pass its health check before the controller saw it.
	// +kubebuilder:default={"observedGeneration":-1}
	// +optional
	Status StackStatus `json:"status,omitempty"`
}

// StackList is a list of Stacks.
// +kubebuilder:object:root=true
type StackList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Stack `json:"items"`
}
