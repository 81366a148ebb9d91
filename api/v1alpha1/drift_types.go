package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DriftMode says what the controller does about drift: changes made to the
// stack's resources outside the program.
// +kubebuilder:validation:Enum=Disabled;Detect;Remediate
type DriftMode string

const (
	// DriftDisabled: no scheduled checks (a manual check still runs, Detect-only).
	DriftDisabled DriftMode = "Disabled"
	// DriftDetect: check on a schedule and report; change nothing.
	DriftDetect DriftMode = "Detect"
	// DriftRemediate: check on a schedule and, when drift is found, run
	// `pulumi up --refresh` at the last applied revision and inputs.
	DriftRemediate DriftMode = "Remediate"
)

// DriftDetection configures drift checks: refresh previews of the last
// applied revision, on a schedule spread over the interval.
type DriftDetection struct {
	// Mode is Disabled, Detect (report only) or Remediate (report, then put
	// the program's values back).
	// +kubebuilder:default=Detect
	// +optional
	Mode DriftMode `json:"mode,omitempty"`

	// Interval between two checks of this Stack. The checks of all Stacks with
	// the same interval are spread evenly over it (status.drift.nextCheckAt).
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') || duration(self) >= duration('5s')",message="driftDetection.interval must be at least 5s"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Ignore lists the changes that are meant to happen (an autoscaler's
	// replicas, cert-manager's annotations): a drift on ignored properties
	// only is no drift; it is neither reported nor remediated.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Ignore []DriftIgnoreRule `json:"ignore,omitempty"`
}

// DriftIgnoreRule matches resources by Pulumi type token and logical name,
// and names the property paths whose drift is ignored on them.
type DriftIgnoreRule struct {
	// Type is a glob over the resource's Pulumi type token
	// ("kubernetes:apps/v1:Deployment", "aws:*"); empty matches every type.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Type string `json:"type,omitempty"`

	// Name is a glob over the resource's logical name (the last part of its
	// URN); empty matches every name.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Name string `json:"name,omitempty"`

	// Properties are property paths in Pulumi's syntax ("spec.replicas",
	// `metadata.annotations["cert-manager.io/*"]`); a path also covers
	// everything under it, and '*' in a path element is a glob. Empty means
	// the whole resource, including its deletion.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Properties []string `json:"properties,omitempty"`
}

// MaxDriftResources bounds status.drift.resources; status.drift.total counts all.
const MaxDriftResources = 50

// MaxDriftProperties bounds the property paths listed per drifted resource.
const MaxDriftProperties = 20

// DriftStatus is what the last drift check found.
type DriftStatus struct {
	// CheckedAt is when the last check finished.
	// +optional
	CheckedAt *metav1.Time `json:"checkedAt,omitempty"`

	// NextCheckAt is when the next scheduled check is due.
	// +optional
	NextCheckAt *metav1.Time `json:"nextCheckAt,omitempty"`

	// Revision is the source revision the last check ran at: the last applied one.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Total counts the drifted resources, ignored ones left out.
	// +optional
	Total int64 `json:"total,omitempty"`

	// Resources are the first drifted resources (at most 50), with the paths
	// of the properties that drifted: names only, never values.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Resources []DriftedResource `json:"resources,omitempty"`

	// Ignored are the drifted resources and paths that spec.driftDetection.ignore
	// left out (at most 50): shown so that people see what the rules hide,
	// and kept so that a retried remediate leaves them as they are too. An
	// entry without properties is a resource ignored as a whole.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Ignored []DriftedResource `json:"ignored,omitempty"`
}

// DriftedResource is one resource whose real state differs from the state
// the last apply left.
type DriftedResource struct {
	// URN of the resource.
	// +kubebuilder:validation:MaxLength=1024
	// +required
	URN string `json:"urn"`

	// Type is the Pulumi type token.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Type string `json:"type,omitempty"`

	// Name is the logical name.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Name string `json:"name,omitempty"`

	// Op is what the refresh found: update (properties changed) or delete
	// (the resource is gone).
	// +kubebuilder:validation:MaxLength=32
	// +required
	Op string `json:"op"`

	// Properties are the paths of the drifted properties (at most 20).
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Properties []string `json:"properties,omitempty"`
}
