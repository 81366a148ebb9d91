package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Enforcement levels of a policy rule.
const (
	// EnforcementMandatory: a violation stops the operation before the
	// resource changes.
	EnforcementMandatory = "mandatory"
	// EnforcementAdvisory: a violation is reported (an event, the Stack's
	// status.policy) and the operation goes on.
	EnforcementAdvisory = "advisory"
	// EnforcementDisabled: the rule is compiled (a broken one is still
	// reported) and never evaluated.
	EnforcementDisabled = "disabled"
)

// Reasons of a policy's Ready condition and of a Stack's conditions.
const (
	// PolicyCompiledReason: every rule compiled and type-checked.
	PolicyCompiledReason = "Compiled"
	// InvalidRuleReason: a rule does not compile; the message names the
	// rule, the field and the position. No rule of the policy applies, and
	// the Stacks it selects run no up or preview until it is fixed.
	InvalidRuleReason = "InvalidRule"
	// PolicyViolationReason: a mandatory rule refused a resource; nothing
	// of that resource changed.
	PolicyViolationReason = "PolicyViolation"
	// PolicyInvalidReason: a policy that selects the Stack does not compile,
	// so the Stack's changes cannot be checked and none is made.
	PolicyInvalidReason = "PolicyInvalid"
	// PolicyPackFailedReason: a policy pack of spec.policyPacks could not be
	// fetched, has no PulumiPolicy.yaml, or cannot run in the runner's image
	// (no language host for its runtime); nothing ran.
	PolicyPackFailedReason = "PolicyPackFailed"
	// NoViolationReason: the last up or preview found nothing.
	NoViolationReason = "NoViolation"
	// AdvisoryViolationReason: the last up or preview found advisory
	// violations only.
	AdvisoryViolationReason = "AdvisoryViolation"
)

// PolicyCompliantCondition is a Stack's verdict of its policies at its last
// up or preview (absent when no policy selects it).
const PolicyCompliantCondition = "PolicyCompliant"

// PolicyRule is one rule: which resources it looks at and the CEL
// expression that must hold for each of them.
type PolicyRule struct {
	// Name identifies the rule in the policy, in findings, events and
	// metrics.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// Enforcement: mandatory (a violation stops the operation before the
	// resource changes), advisory (reported only) or disabled.
	// +kubebuilder:validation:Enum=mandatory;advisory;disabled
	// +kubebuilder:default=mandatory
	// +optional
	Enforcement string `json:"enforcement,omitempty"`

	// Match chooses the resources the rule looks at; empty: every resource.
	// +optional
	Match PolicyMatch `json:"match,omitempty"`

	// Expression is CEL that is true when the resource complies. It reads
	// `resource` (type, name, urn, op, inputs, oldInputs, provider {type,
	// name, urn, inputs}) and `stack` (namespace, name, labels). It is
	// compiled and type-checked when the policy changes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=10000
	// +required
	Expression string `json:"expression"`

	// Message is the text of a violation.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// MessageExpression is CEL giving the text of a violation instead of
	// Message; secret inputs read "[secret]" there.
	// +kubebuilder:validation:MaxLength=10000
	// +optional
	MessageExpression string `json:"messageExpression,omitempty"`
}

// PolicyMatch chooses resources. Each list that is empty matches every
// resource; types and names are globs where `*` is any run of characters
// and `?` one.
type PolicyMatch struct {
	// Types are globs over the resource's type token, e.g.
	// "aws:s3/*" or "kubernetes:core/v1:ConfigMap".
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Types []string `json:"types,omitempty"`

	// Operations the rule checks: create, update, replace, delete. Empty:
	// every change but a delete, and the resources the update leaves as
	// they are (the policy holds for what the program declares); a rule for
	// deletes lists delete. A rule that lists replace or delete makes each
	// up of the Stacks it selects save an update plan first and apply that
	// plan (the engine asks a policy about neither), one preview more.
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:Enum=create;update;replace;delete
	// +optional
	Operations []string `json:"operations,omitempty"`

	// Names are globs over the resource's name in the program.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Names []string `json:"names,omitempty"`
}

// StackPolicySpec is a namespace's rules for its Stacks.
type StackPolicySpec struct {
	// Selector chooses the Stacks of the policy's namespace it applies to;
	// empty: all of them.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Rules, each checked on every resource it matches.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +required
	Rules []PolicyRule `json:"rules"`
}

// ClusterStackPolicySpec is a platform team's rules for Stacks across
// namespaces; a tenant's StackPolicy adds rules beside it, never removes
// one.
type ClusterStackPolicySpec struct {
	// NamespaceSelector chooses the namespaces whose Stacks it applies to;
	// empty: every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Selector chooses Stacks in those namespaces by label; empty: all.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Rules, each checked on every resource it matches.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	// +required
	Rules []PolicyRule `json:"rules"`
}

// PolicyStatus is what the controller observed of a policy.
type PolicyStatus struct {
	// ObservedGeneration is the last metadata.generation compiled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (True when every rule compiled; False with reason
	// InvalidRule naming the rule, field and position otherwise).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StackPolicyStatus is a Stack's policy findings at its last up or preview.
type StackPolicyStatus struct {
	// OperationID is the operation that found them.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	OperationID string `json:"operationID,omitempty"`
	// Policies names the policies that selected the Stack: "<kind>/<name>"
	// or "<kind>/<namespace>/<name>".
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	Policies []string `json:"policies,omitempty"`
	// Violations are the findings, mandatory first, at most 20.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Violations []PolicyViolation `json:"violations,omitempty"`
	// More counts the findings left out of Violations.
	// +optional
	More int32 `json:"more,omitempty"`
	// Digest identifies the rules of Policies as the operation ran with
	// them: when an operation they stopped (PolicyViolation,
	// PolicyInvalid) is waiting to be retried, a change of the policies
	// that select the Stack retries it at once.
	// +kubebuilder:validation:MaxLength=80
	// +optional
	Digest string `json:"digest,omitempty"`
}

// PolicyViolation is one rule's finding on one resource.
type PolicyViolation struct {
	// Policy is "<kind>/<policy>/<rule>".
	// +kubebuilder:validation:MaxLength=512
	Policy string `json:"policy"`
	// Enforcement is mandatory (the operation stopped) or advisory.
	// +kubebuilder:validation:MaxLength=16
	Enforcement string `json:"enforcement"`
	// URN is the resource's.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	URN string `json:"urn,omitempty"`
	// Message says what is wrong; secrets read "[secret]".
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}

// StackPolicy holds rules every resource of the Stacks it selects (in its
// namespace) must follow before Pulumi creates or updates it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackpilot
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
type StackPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec StackPolicySpec `json:"spec"`
	// +optional
	Status PolicyStatus `json:"status,omitempty"`
}

// StackPolicyList is a list of StackPolicies.
// +kubebuilder:object:root=true
type StackPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StackPolicy `json:"items"`
}

// ClusterStackPolicy holds rules every resource of the Stacks it selects,
// in any namespace, must follow before Pulumi creates or updates it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=stackpilot
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].message",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
type ClusterStackPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterStackPolicySpec `json:"spec"`
	// +optional
	Status PolicyStatus `json:"status,omitempty"`
}

// ClusterStackPolicyList is a list of ClusterStackPolicies.
// +kubebuilder:object:root=true
type ClusterStackPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterStackPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &StackPolicy{}, &StackPolicyList{}, &ClusterStackPolicy{}, &ClusterStackPolicyList{})
		return nil
	})
}

// GetConditions returns the status conditions (Flux's conditions.Getter).
func (in *StackPolicy) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions (Flux's conditions.Setter).
func (in *StackPolicy) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GetConditions returns the status conditions (Flux's conditions.Getter).
func (in *ClusterStackPolicy) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions sets the status conditions (Flux's conditions.Setter).
func (in *ClusterStackPolicy) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }
