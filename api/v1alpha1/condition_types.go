package v1alpha1

import "github.com/fluxcd/pkg/apis/meta"

const (
	// StackFinalizer is set on every Stack the controller handles, so that it can
	// destroy the stack's resources (when spec.destroyOnDelete is true) and clean
	// up what it published before the object goes away.
	StackFinalizer = "stackpilot.dev/finalizer"

	// ReconcileRequestAnnotation asks for a reconcile now when its value changes
	// (any string; by convention a timestamp). The controller records the value
	// it handled in status.lastHandledReconcileAt. Flux's
	// reconcile.fluxcd.io/requestedAt (meta.ReconcileRequestAnnotation) is honoured too.
	ReconcileRequestAnnotation = "stackpilot.dev/requestedAt"

	// ShardLabel is the label that puts a Stack, Receiver or Alert in a
	// shard, as in Flux: a controller run with --watch-label-selector
	// "sharding.fluxcd.io/key in (shard1)" serves those labelled shard1, and
	// the main one, with "!sharding.fluxcd.io/key", those without it.
	ShardLabel = "sharding.fluxcd.io/key"

	// DriftCheckRequestPrefix starts a reconcile-now value that asks for a
	// drift check now ("drift-2026-12-01T10:00:00Z"): `stackpilot drift check`
	// writes one.
	DriftCheckRequestPrefix = "drift-"

	// MaxHistory is how many operations status.history keeps, newest first.
	MaxHistory = 10

	// SecretOutputValue stands in status.outputs for a stack output that Pulumi
	// marks secret; the real value is never written to the Stack.
	SecretOutputValue = "[secret]"

	// MaxStatusOutputs is how many outputs status.outputs lists; the rest are
	// counted in status.outputsOmitted (the outputs Secret carries them all).
	MaxStatusOutputs = 100

	// MaxStatusOutputValue is the longest value status.outputs shows (compact
	// JSON, in bytes); a longer one is replaced by an OmittedOutputPrefix note.
	MaxStatusOutputValue = 1024

	// MaxStatusOutputsBytes is the budget of all values in status.outputs; the
	// values that do not fit (largest last) are replaced by a note.
	MaxStatusOutputsBytes = 16 * 1024

	// OmittedOutputPrefix starts the note that stands in status.outputs for a
	// value too large for the status, e.g. "[omitted: 2.3 MiB; see the outputs
	// Secret]". A JSON value never starts with "[o", so the note is unambiguous.
	OmittedOutputPrefix = "[omitted: "

	// MaxHistoryMessage bounds status.history[].message (characters).
	MaxHistoryMessage = 2048

	// DefaultPassphraseKey is the key read from the passphrase Secret when
	// spec.secretsProvider.passphraseSecretRef.key is not set.
	DefaultPassphraseKey = "passphrase"
)

// Condition types. Ready, Reconciling and Stalled follow kstatus and are the
// Flux constants, re-exported so that callers need one import.
const (
	// ReadyCondition is True when the stack's resources match the program at
	// status.lastAppliedRevision with the inputs in status.inputsDigest.
	ReadyCondition = meta.ReadyCondition

	// ReconcilingCondition is True while the controller works towards a new
	// revision or new inputs (abnormal-true: absent when not reconciling).
	ReconcilingCondition = meta.ReconcilingCondition

	// StalledCondition is True when the controller cannot progress without a
	// change to the Stack or its environment, for example an invalid spec
	// (abnormal-true: absent unless stalled).
	StalledCondition = meta.StalledCondition

	// OutputsPublishedCondition is True when the outputs Secret and ConfigMap
	// of spec.outputs hold the outputs of the last successful up, False when
	// writing them failed (the up itself is applied; the publish is retried
	// from the stack's state, with its own backoff). Absent without spec.outputs.
	OutputsPublishedCondition = "OutputsPublished"

	// DriftedCondition is True when the last drift check found resources that
	// differ from what the last apply left (ignored properties left out),
	// False after a clean check or a successful remediation, Unknown when the
	// check failed. It does not change Ready: a drifted Stack is still Ready,
	// unless it remediates and the remediation failed.
	DriftedCondition = "Drifted"

	// PlanPendingCondition is True while status.pendingPlan holds a plan that
	// waits for approval (Manual) or is only shown (PreviewOnly); False once
	// it was applied or nothing is pending. Absent in Auto mode.
	PlanPendingCondition = "PlanPending"
)

// Condition reasons.
const (
	// ProgressingReason: a reconcile or an operation is under way.
	ProgressingReason = meta.ProgressingReason

	// SucceededReason: the last operation succeeded and the stack is up to date.
	SucceededReason = meta.SucceededReason

	// SuspendedReason: spec.suspend is true; nothing is reconciled.
	SuspendedReason = meta.SuspendedReason

	// InvalidSpecReason: the spec is valid for the API server but cannot be acted
	// on (for example a semver range that does not parse). The Stack is Stalled.
	InvalidSpecReason = "InvalidSpec"

	// SourceNotFoundReason: the source (repository, branch, tag, commit) does not exist.
	SourceNotFoundReason = "SourceNotFound"

	// AuthenticationFailedReason: the source refused the credentials, or the
	// credentials Secret is missing or incomplete.
	AuthenticationFailedReason = "AuthenticationFailed"

	// GitOperationFailedReason: a Git clone, fetch or checkout failed.
	GitOperationFailedReason = "GitOperationFailed"

	// OCIOperationFailedReason: a registry request (resolving a tag, listing
	// tags, pulling an artifact) failed.
	OCIOperationFailedReason = "OCIOperationFailed"

	// SourceNotReadyReason: the Flux source named by spec.source.sourceRef is
	// missing, not Ready, or has no artifact yet.
	SourceNotReadyReason = "SourceNotReady"

	// CrossNamespaceRefNotAllowedReason: spec.source.sourceRef names another
	// namespace and the controller does not allow it.
	CrossNamespaceRefNotAllowedReason = "CrossNamespaceRefNotAllowed"

	// VerificationFailedReason: the OCI artifact's signature did not verify
	// with the keys of spec.source.oci.verify; nothing of it was applied.
	VerificationFailedReason = "VerificationFailed"

	// ArtifactFailedReason: the program tree could not be stored in or read from
	// the artifact cache.
	ArtifactFailedReason = meta.ArtifactFailedReason

	// InputsNotFoundReason: a ConfigMap or Secret named in configFrom, envFrom,
	// backendSecretRef or secretsProvider (and not marked optional) is missing,
	// or lacks a requested key.
	InputsNotFoundReason = "InputsNotFound"

	// ServiceAccountNotFoundReason: the ServiceAccount the program acts as
	// (spec.serviceAccountName or the controller's --default-service-account)
	// does not exist in the Stack's namespace. Retried at the retry interval.
	ServiceAccountNotFoundReason = "ServiceAccountNotFound"

	// RunnerServiceAccountMissingReason: the Stack runs as a Job (its
	// spec.runner.executor, or the controller's --default-executor) and has
	// no identity of its own: neither spec.serviceAccountName nor the
	// controller's --default-service-account. A Job never runs as the
	// controller. The Stack is Stalled.
	RunnerServiceAccountMissingReason = "RunnerServiceAccountMissing"

	// BackendUnreachableFromRunnerReason: the Stack runs as a Job and its
	// backend (spec.backend or the controller's --default-backend) is a
	// file:// path on the controller's volume, which the runner Pod cannot
	// reach. The Stack is Stalled until it names a backend both reach (S3,
	// PostgreSQL, Azure Blob, Google Cloud Storage, Pulumi Cloud).
	BackendUnreachableFromRunnerReason = "BackendUnreachableFromRunner"

	// LocalExecutorNotAllowedReason: the Stack sets spec.runner.executor:
	// Local where the controller runs Stacks as Jobs by default, outside
	// the controller's namespace, and the controller does not allow it
	// (--allow-local-executor). A Local program can act as the controller.
	// The Stack is Stalled.
	LocalExecutorNotAllowedReason = "LocalExecutorNotAllowed"

	// DigestKeyUnavailableReason: the controller could not read or create the
	// Secret holding the key of the inputs digest (--digest-key-secret).
	DigestKeyUnavailableReason = "DigestKeyUnavailable"

	// ProgramErrorReason: the Pulumi program or its configuration is wrong; the
	// message carries Pulumi's diagnostics.
	ProgramErrorReason = "ProgramError"

	// OperationFailedReason: a Pulumi operation failed for a reason that is not
	// more precisely known.
	OperationFailedReason = "OperationFailed"

	// BackendFailedReason: the state backend is unreachable or refused access.
	BackendFailedReason = "BackendFailed"

	// LockedReason: another update holds the stack's lock.
	LockedReason = "Locked"

	// TimeoutReason: an operation ran past spec.timeout and was cancelled.
	TimeoutReason = "Timeout"

	// InterruptedReason: an operation was found unfinished (status.currentOperation
	// set) after a controller restart.
	InterruptedReason = "Interrupted"

	// RunnerPodFailedReason signals that the runner Pod of a Job operation
	// could not run it: its image could not be pulled, it was not scheduled
	// in time, or a quota refused it. Nothing ran; it is retried with backoff.
	RunnerPodFailedReason = "RunnerPodFailed"

	// PublishedReason: the outputs Secret and ConfigMap are up to date.
	PublishedReason = "Published"

	// OutputsTooLarge: the outputs do not fit in a Secret or ConfigMap (1 MiB
	// of data each); the message names the largest outputs and their sizes.
	OutputsTooLargeReason = "OutputsTooLarge"

	// OutputsConflictReason: the outputs Secret or ConfigMap exists and is
	// controlled by another object (for example another Stack naming it).
	OutputsConflictReason = "OutputsConflict"

	// PublishFailedReason: writing the outputs, or reading them from the
	// stack's state for a retry, failed for another reason.
	PublishFailedReason = "PublishFailed"

	// StackClaimedReason: the Pulumi stack (backend + stack name) belongs to
	// another Stack, as its stackpilot:owner stack tag says. The Stack is
	// Stalled; nothing is run on that stack, its locks are never touched.
	StackClaimedReason = "StackClaimed"

	// StackChangedReason: spec.backend or spec.stackName (or the default backend
	// it resolves to) changed on a Stack that has applied
	// (status.appliedStack). The Stack is Stalled until the state is moved or
	// the change is reverted.
	StackChangedReason = "StackChanged"

	// DriftDetectedReason: the last drift check found drift (Drifted=True).
	DriftDetectedReason = "DriftDetected"

	// NoDriftReason: the last drift check found none (Drifted=False).
	NoDriftReason = "NoDrift"

	// RemediatedReason: a remediate put the program's values back (Drifted=False).
	RemediatedReason = "Remediated"

	// DriftCheckFailedReason: the last drift check could not run to the end
	// (Drifted=Unknown); it is retried after spec.retryInterval.
	DriftCheckFailedReason = "DriftCheckFailed"

	// AwaitingApprovalReason: a plan waits for the annotation
	// stackpilot.dev/approve to name it (PlanPending=True; Ready=False).
	AwaitingApprovalReason = "AwaitingApproval"

	// PreviewOnlyReason: spec.approval.mode is PreviewOnly; the plan is shown,
	// never applied (PlanPending=True).
	PreviewOnlyReason = "PreviewOnly"

	// PlanAppliedReason: the approved plan was applied (PlanPending=False).
	PlanAppliedReason = "PlanApplied"

	// NoPendingPlanReason: there is no change to approve (PlanPending=False).
	NoPendingPlanReason = "NoPendingPlan"

	// PlanInvalidReason: an up of an approved plan found that the stack would
	// change otherwise than planned, and changed nothing beyond the plan.
	PlanInvalidReason = "PlanInvalid"

	// DependencyNotReadyReason: a Stack of spec.dependsOn (or of a
	// configFrom stackOutputs) is missing, not Ready at its latest
	// generation, or has a change pending.
	DependencyNotReadyReason = "DependencyNotReady"

	// ShardHandoffReason: the Stack was relabelled to this controller's
	// shard while the controller of its old shard ran an operation on it;
	// this one waits for that operation to end before it acts (Ready=False).
	ShardHandoffReason = "ShardHandoff"

	// DependencyCycleReason: spec.dependsOn leads back to this Stack. The
	// Stack is Stalled; the message names the cycle.
	DependencyCycleReason = "DependencyCycle"

	// RolledBackReason: an up of a new change failed and the last applied
	// revision and inputs were applied again (Ready=False, naming both).
	RolledBackReason = "RolledBack"

	// RollbackFailedReason: the rollback itself failed; it is not retried.
	RollbackFailedReason = "RollbackFailed"

	// DestroyFailedReason: destroying the stack on deletion failed; the finalizer
	// stays until it succeeds.
	DestroyFailedReason = "DestroyFailed"
)
