// Package plan holds the full record of a previewed change that waits for
// approval: the Document the controller keeps in its data dir beside
// Pulumi's own update plan (Store), serves on its /plans endpoint, and
// `stackpilot plan` prints (Render). The Stack's status.pendingPlan carries
// only its first resources.
package plan

import (
	"time"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// APIVersion is the version of Document's JSON.
const APIVersion = "plan.stackpilot.dev/v1alpha1"

// Document is one plan, complete: every resource it would change, with the
// paths of the changed properties (never values, so it may be shown to anyone
// who may read the Stack).
type Document struct {
	APIVersion string `json:"apiVersion"`
	// ID is status.pendingPlan.id: the value that approves it.
	ID string `json:"id"`
	// Namespace and Name are the Stack's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// StackName is the Pulumi stack the plan is for.
	StackName     string    `json:"stackName"`
	Revision      string    `json:"revision"`
	ProgramDigest string    `json:"programDigest,omitempty"`
	InputsDigest  string    `json:"inputsDigest"`
	CreatedAt     time.Time `json:"createdAt"`
	// Mode is the Stack's spec.approval.mode when the plan was made: a
	// PreviewOnly plan is never applied.
	Mode    v1alpha1.ApprovalMode  `json:"mode"`
	Changes v1alpha1.ChangeSummary `json:"changes"`
	// Same counts the resources the plan leaves as they are.
	Same int64 `json:"same,omitempty"`
	// Resources are all the resources the plan would change, in the order
	// the engine reported them.
	Resources []v1alpha1.PlannedResource `json:"resources"`
}
