package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ProviderType names where an Alert sends its messages.
// +kubebuilder:validation:Enum=slack;msteams;pagerduty;github;generic;generic-hmac
type ProviderType string

const (
	// ProviderSlack posts to a Slack incoming webhook (address).
	ProviderSlack ProviderType = "slack"
	// ProviderMSTeams posts a MessageCard to a Teams incoming webhook (address).
	ProviderMSTeams ProviderType = "msteams"
	// ProviderPagerDuty sends PagerDuty Events API v2 events; the Secret's
	// "token" is the integration's routing key.
	ProviderPagerDuty ProviderType = "pagerduty"
	// ProviderGitHub sets a commit status on the Stack's Git commit; the
	// Secret's "token" is a GitHub token allowed to write statuses.
	ProviderGitHub ProviderType = "github"
	// ProviderGeneric posts the event as JSON.
	ProviderGeneric ProviderType = "generic"
	// ProviderGenericHMAC posts the event as JSON with an X-Signature header:
	// sha256=<hex HMAC-SHA256 of the body keyed with the Secret's "token">.
	ProviderGenericHMAC ProviderType = "generic-hmac"
)

// Default addresses of the providers that have one.
const (
	DefaultPagerDutyAddress = "https://events.pagerduty.com/v2/enqueue"
	DefaultGitHubAddress    = "https://api.github.com"
)

// Keys read from an Alert's spec.provider.secretRef.
const (
	// AlertAddressKey overrides spec.provider.address (keep webhook URLs that
	// carry a credential, such as Slack's, out of the spec).
	AlertAddressKey = "address"
	// AlertTokenKey is the GitHub token, the PagerDuty routing key, or the
	// generic-hmac signing key.
	AlertTokenKey = "token"
)

// AlertEventType names a change of a Stack's state an Alert can report.
// +kubebuilder:validation:Enum=applied;failed;recovered;drifted;drift-resolved;plan-pending;rolled-back;policy-violation
type AlertEventType string

const (
	// EventApplied: a new revision (or new inputs) was applied.
	EventApplied AlertEventType = "applied"
	// EventFailed: the Stack went from working to failing (Ready=False for a
	// failure reason). Retries of the same failure send nothing.
	EventFailed AlertEventType = "failed"
	// EventRecovered: the Stack is Ready again after a failure.
	EventRecovered AlertEventType = "recovered"
	// EventDrifted: a drift check found drift (Drifted=True).
	EventDrifted AlertEventType = "drifted"
	// EventDriftResolved: the drift is gone (Drifted=False after True).
	EventDriftResolved AlertEventType = "drift-resolved"
	// EventPlanPending: a new plan waits for approval (status.pendingPlan).
	EventPlanPending AlertEventType = "plan-pending"
	// EventRolledBack: an automatic rollback ran (a new status.rollback).
	EventRolledBack AlertEventType = "rolled-back"
	// EventPolicyViolation: an up or preview found policy violations
	// (status.policy), mandatory or advisory.
	EventPolicyViolation AlertEventType = "policy-violation"
)

// AlertEventTypes lists every event type, in the order the docs give them.
var AlertEventTypes = []AlertEventType{EventApplied, EventFailed, EventRecovered,
	EventDrifted, EventDriftResolved, EventPlanPending, EventRolledBack, EventPolicyViolation}

// AlertSpec says which Stacks' changes to report, and where.
type AlertSpec struct {
	// Provider is where messages go.
	// +required
	Provider AlertProvider `json:"provider"`

	// Stacks selects the Stacks of the Alert's namespace to report on: those
	// matching the selector or named in names. Both empty: every Stack of
	// the namespace.
	// +optional
	Stacks AlertStacks `json:"stacks,omitzero"`

	// Events are the changes to report; empty: all of them.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Events []AlertEventType `json:"events,omitempty"`

	// Suspend stops sending; changes that happen meanwhile are not sent later.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// AlertProvider is the endpoint of an Alert.
// +kubebuilder:validation:XValidation:rule="self.type in ['pagerduty', 'github'] || has(self.address) || has(self.secretRef)",message="spec.provider: set address, or secretRef with an \"address\" key"
// +kubebuilder:validation:XValidation:rule="!(self.type in ['pagerduty', 'github', 'generic-hmac']) || has(self.secretRef)",message="spec.provider: this type needs secretRef with a \"token\" key"
type AlertProvider struct {
	// Type of the endpoint.
	// +required
	Type ProviderType `json:"type"`

	// Address is the URL messages are posted to. Defaults: pagerduty
	// https://events.pagerduty.com/v2/enqueue, github https://api.github.com
	// (the API root; for GitHub Enterprise https://<host>/api/v3). The
	// Secret's "address" key, when present, takes precedence.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern="^https?://"
	// +optional
	Address string `json:"address,omitempty"`

	// SecretRef names a Secret in the Alert's namespace: "address" (optional,
	// overrides address) and "token" (github: the token; pagerduty: the
	// routing key; generic-hmac: the signing key; others: unused).
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Channel is the Slack channel to post to (slack only; default: the
	// webhook's own channel).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Channel string `json:"channel,omitempty"`
}

// AlertStacks selects Stacks.
type AlertStacks struct {
	// Selector matches Stacks by label.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Names lists Stacks by name.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Names []string `json:"names,omitempty"`
}

// AlertStatus reports on an Alert's deliveries.
type AlertStatus struct {
	// ObservedGeneration is the last metadata.generation the controller acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (True when the provider's settings resolve; False
	// with reason InvalidSpec, InputsNotFound or DeliveryFailed).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastSent is when a message was last delivered.
	// +optional
	LastSent *metav1.Time `json:"lastSent,omitempty"`

	// Sent counts the messages delivered since the controller started.
	// +optional
	Sent int64 `json:"sent,omitempty"`

	// Failures counts the messages given up on (after every retry) or
	// dropped because the queue was full, since the controller started.
	// +optional
	Failures int64 `json:"failures,omitempty"`

	// LastError is why the last message was given up on (never a secret:
	// no address, no token).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`

	// LastErrorAt is when the last message was given up on.
	// +optional
	LastErrorAt *metav1.Time `json:"lastErrorAt,omitempty"`
}

// DeliveryFailedReason: the last message to an Alert's provider was given
// up on after its retries (Ready=False until one is delivered).
const DeliveryFailedReason = "DeliveryFailed"

// Alert sends a message when a Stack's state changes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackpilot
// +kubebuilder:printcolumn:name="Provider",type="string",JSONPath=".spec.provider.type",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
type Alert struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AlertSpec `json:"spec"`
	// +optional
	Status AlertStatus `json:"status,omitempty"`
}

// AlertList is a list of Alerts.
// +kubebuilder:object:root=true
type AlertList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Alert `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Alert{}, &AlertList{})
		return nil
	})
}

// GetConditions returns the status conditions (Flux's conditions.Getter).
func (in *Alert) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions (Flux's conditions.Setter).
func (in *Alert) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }
