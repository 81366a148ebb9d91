package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Receiver types: who sends the webhook, which decides how it is signed and
// how its events are read.
const (
	GitHubReceiver      = "github"
	GitLabReceiver      = "gitlab"
	BitbucketReceiver   = "bitbucket"
	GiteaReceiver       = "gitea"
	GenericHMACReceiver = "generic-hmac"
	GenericReceiver     = "generic"
	OCIReceiver         = "oci"
)

const (
	// ReceiverTokenKey is the key of spec.secretRef's Secret holding the
	// shared secret (the HMAC key, or GitLab's token).
	ReceiverTokenKey = "token"

	// WebhookPathPrefix starts every Receiver's URL path.
	WebhookPathPrefix = "/hook/"

	// Reasons of a Receiver's Ready condition.

	// ReceiverServingReason: the Secret holds a token and the path is served.
	ReceiverServingReason = "Serving"
	// ReceiverSecretNotFoundReason: spec.secretRef names no Secret, or one
	// without a non-empty "token".
	ReceiverSecretNotFoundReason = "SecretNotFound"
	// ReceiverSuspendedReason: spec.suspend is true; events are ignored.
	ReceiverSuspendedReason = "Suspended"
)

// ReceiverSpec says who may call the Receiver and which Stacks its events
// reconcile.
// +kubebuilder:validation:XValidation:rule="!has(self.acceptUnsigned) || !self.acceptUnsigned || self.type == 'oci'",message="acceptUnsigned applies to type oci only: the other types either sign every request or (generic) have no signature to skip"
type ReceiverSpec struct {
	// Type of the sender: github, gitlab, bitbucket, gitea, generic-hmac,
	// generic or oci. It decides the signature header and the event format.
	// +kubebuilder:validation:Enum=github;gitlab;bitbucket;gitea;generic-hmac;generic;oci
	// +required
	Type string `json:"type"`

	// Events the Receiver acts on (the sender's event names, e.g. "push",
	// "Push Hook", "repo:refs_changed"); others are answered 200 and ignored.
	// Empty: the push events of the type (see the Receivers documentation).
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=100
	// +optional
	Events []string `json:"events,omitempty"`

	// SecretRef names a Secret in the Receiver's namespace whose key "token"
	// is the shared secret. It is also part of the URL path.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`

	// Resources, when set, narrows the Stacks an event may reconcile to those
	// whose labels match; unset, every matching Stack of the namespace.
	// +optional
	Resources *metav1.LabelSelector `json:"resources,omitempty"`

	// Suspend ignores every event (answered 200) while true.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// AcceptUnsigned lets an oci Receiver act on a request without an
	// X-Signature header, for registries that cannot sign their
	// notifications: the URL path is then the only credential. Off by
	// default: an unsigned request is refused (401), as one with a wrong
	// signature is; a request that carries a signature is checked either
	// way. Only type oci may set it.
	// +optional
	AcceptUnsigned bool `json:"acceptUnsigned,omitempty"`
}

// ReceiverStatus is what the controller observed of a Receiver.
type ReceiverStatus struct {
	// ObservedGeneration is the last metadata.generation the controller acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (True when the webhook path is served).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// WebhookPath is the URL path to give the sender:
	// /hook/<sha256 hex of token + name + namespace>.
	// +optional
	WebhookPath string `json:"webhookPath,omitempty"`

	// LastHandledEventAt is when the last accepted event was handled.
	// +optional
	LastHandledEventAt *metav1.Time `json:"lastHandledEventAt,omitempty"`

	// LastEvent summarises the last accepted event (bounded; no secret).
	// +optional
	LastEvent *ReceiverEvent `json:"lastEvent,omitempty"`
}

// ReceiverEvent summarises one accepted event.
type ReceiverEvent struct {
	// Event is the sender's event name.
	// +kubebuilder:validation:MaxLength=100
	Event string `json:"event,omitempty"`
	// Repository is the repository the event is about, normalised.
	// +kubebuilder:validation:MaxLength=512
	Repository string `json:"repository,omitempty"`
	// Ref is the pushed Git reference (refs/heads/main) or OCI tag.
	// +kubebuilder:validation:MaxLength=256
	Ref string `json:"ref,omitempty"`
	// Stacks is how many Stacks were asked to reconcile.
	Stacks int32 `json:"stacks"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rcv,categories=stackpilot
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.type",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Path",type="string",JSONPath=".status.webhookPath",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""

// Receiver serves a webhook that requests a reconcile of the Stacks whose
// source a push event is about.
type Receiver struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReceiverSpec   `json:"spec,omitempty"`
	Status ReceiverStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ReceiverList is a list of Receivers.
type ReceiverList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Receiver `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Receiver{}, &ReceiverList{})
		return nil
	})
}
