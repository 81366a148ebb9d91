package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApprovalMode says whether a change is applied as soon as it is seen, after
// a person approves its plan, or never.
// +kubebuilder:validation:Enum=Auto;Manual;PreviewOnly
type ApprovalMode string

const (
	// ApprovalAuto applies every new revision or input change at once.
	ApprovalAuto ApprovalMode = "Auto"
	// ApprovalManual previews a change, records its plan in
	// status.pendingPlan and applies that very plan only once the annotation
	// stackpilot.dev/approve equals status.pendingPlan.id.
	ApprovalManual ApprovalMode = "Manual"
	// ApprovalPreviewOnly previews every change and reports it in
	// status.pendingPlan; nothing is ever applied.
	ApprovalPreviewOnly ApprovalMode = "PreviewOnly"
)

// ApproveAnnotation approves the pending plan whose id is its value.
const ApproveAnnotation = "stackpilot.dev/approve"

// Approval configures when a change is applied.
type Approval struct {
	// Mode is Auto (apply at once), Manual (apply an approved plan) or
	// PreviewOnly (preview, never apply).
	// +kubebuilder:default=Auto
	// +optional
	Mode ApprovalMode `json:"mode,omitempty"`
}

// MaxPlanResources bounds status.pendingPlan.resources; total counts all.
const MaxPlanResources = 50

// MaxPlanProperties bounds the property names listed per planned resource.
const MaxPlanProperties = 20

// PendingPlan is a previewed change waiting for approval (Manual) or shown
// only (PreviewOnly). The full plan is kept by the controller, not in the
// Stack: `stackpilot plan` and the controller's /plans endpoint serve it.
type PendingPlan struct {
	// ID names the plan; approving means setting the annotation
	// stackpilot.dev/approve to it.
	// +kubebuilder:validation:MaxLength=128
	// +required
	ID string `json:"id"`

	// Revision is the source revision the plan was made at.
	// +required
	Revision string `json:"revision"`

	// InputsDigest is the digest of the inputs the plan was made with.
	// +required
	InputsDigest string `json:"inputsDigest"`

	// ProgramDigest is the digest of the program the plan was made from.
	// +optional
	ProgramDigest string `json:"programDigest,omitempty"`

	// CreatedAt is when the preview that made the plan ended.
	// +required
	CreatedAt metav1.Time `json:"createdAt"`

	// Changes counts the resources the plan would change.
	// +optional
	Changes ChangeSummary `json:"changes,omitzero"`

	// Total is how many resources the plan would change; resources lists the
	// first MaxPlanResources (50).
	// +optional
	Total int64 `json:"total,omitempty"`

	// Resources are the first 50 resources the plan would change, with the
	// names of their changed properties (never values).
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Resources []PlannedResource `json:"resources,omitempty"`
}

// PlannedResource is one resource a plan would change.
type PlannedResource struct {
	// URN of the resource.
	// +kubebuilder:validation:MaxLength=1024
	// +required
	URN string `json:"urn"`

	// Type is the resource's Pulumi type token.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Type string `json:"type,omitempty"`

	// Op is what the plan does to it: create, update, replace, delete.
	// +kubebuilder:validation:MaxLength=64
	// +required
	Op string `json:"op"`

	// Properties are the paths of the changed properties (names only, at
	// most 20).
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Properties []string `json:"properties,omitempty"`
}

// DependencyReference names a Stack this one waits for.
type DependencyReference struct {
	// Name of the Stack.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Namespace of the Stack; this Stack's own when empty. Another namespace
	// is refused unless the controller runs with --allow-cross-namespace-refs.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// StackOutputsReference turns another Stack's outputs into config values.
type StackOutputsReference struct {
	// Name of the Stack whose outputs are read.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Namespace of the Stack; this Stack's own when empty. Another namespace
	// is refused unless the controller runs with --allow-cross-namespace-refs.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Keys maps outputs to config keys. Empty means every output, each under
	// its own name. A listed output the upstream Stack does not have keeps
	// this Stack waiting (InputsNotFound).
	// +kubebuilder:validation:MaxItems=500
	// +optional
	Keys []OutputKey `json:"keys,omitempty"`
}

// OutputKey maps one stack output to a config key.
type OutputKey struct {
	// Output is the name of the upstream stack's output.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Output string `json:"output"`

	// As is the config key ("name" or "namespace:name"); the output's name
	// when empty.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	As string `json:"as,omitempty"`
}

// Rollback configures the automatic rollback of a failed change.
type Rollback struct {
	// Enabled turns automatic rollback on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// AfterFailures is how many failed ups of a new revision or new inputs
	// make a rollback.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	AfterFailures int32 `json:"afterFailures,omitempty"`
}

// RollbackStatus is the last rollback: which change failed, and what was
// put back.
type RollbackStatus struct {
	// FailedRevision is the revision whose up failed.
	// +required
	FailedRevision string `json:"failedRevision"`

	// FailedProgramDigest and FailedInputsDigest identify the failed change:
	// it is not tried again until the program or the inputs differ from
	// them, or a person requests a reconcile.
	// +optional
	FailedProgramDigest string `json:"failedProgramDigest,omitempty"`
	// +optional
	FailedInputsDigest string `json:"failedInputsDigest,omitempty"`

	// RestoredRevision is the revision the rollback applied again.
	// +required
	RestoredRevision string `json:"restoredRevision"`

	// RestoredInputsDigest is the digest of the inputs the rollback applied
	// again.
	// +optional
	RestoredInputsDigest string `json:"restoredInputsDigest,omitempty"`

	// At is when the rollback ended.
	// +required
	At metav1.Time `json:"at"`

	// Outcome of the rollback: succeeded or failed.
	// +required
	Outcome OperationOutcome `json:"outcome"`
}
