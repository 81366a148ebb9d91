package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Forges that pull-request previews post to (spec.previews.provider).
const (
	ForgeGitHub    = "github"
	ForgeGitLab    = "gitlab"
	ForgeGitea     = "gitea"
	ForgeBitbucket = "bitbucket"
)

const (
	// PreviewRequestAnnotationPrefix starts the annotation a Receiver (or
	// the poller) sets on a Stack for each open pull request it should
	// preview: "preview.stackpilot.dev/pr-<number>", its value a
	// PreviewRequest in JSON. The controller removes it once the pull
	// request is closed and its preview cleaned up.
	PreviewRequestAnnotationPrefix = "preview.stackpilot.dev/pr-"

	// RevisionPreviewAnnotation asks for a preview of one revision on
	// demand (`stackpilot preview STACK --revision REF`), its value a
	// RevisionPreviewRequest in JSON; status.revisionPreview answers it.
	RevisionPreviewAnnotation = "preview.stackpilot.dev/revision"

	// ForgeTokenKey is the key of spec.previews.secretRef's Secret that
	// holds the forge API token.
	ForgeTokenKey = "token"

	// DefaultForkLabel is the label a person with write access adds to a
	// pull request from a fork before its program runs.
	DefaultForkLabel = "stackpilot/preview"

	// MaxPreviews bounds status.previews: the open pull requests a Stack
	// keeps a preview of.
	MaxPreviews = 50
)

// Previews configures pull-request previews: each pull request whose base is
// the branch this Stack follows and that changes the program's paths
// (spec.source.dir and spec.source.git.include) is previewed at its head
// commit, with the Stack's current inputs, identity and executor, and the
// result is posted back to the pull request as one comment (edited on each
// push) and one commit status. A preview never applies anything, never takes
// the stack's lock and never creates the stack in its backend.
type Previews struct {
	// Enabled turns pull-request previews on for this Stack. Pull requests
	// reach it through a Receiver whose spec.events include the pull
	// request event of its type, or through spec.previews.pollInterval.
	// +required
	Enabled bool `json:"enabled"`

	// Provider is the forge the repository is on: github, gitlab, gitea or
	// bitbucket (Bitbucket Cloud). Unset: github for github.com, gitlab for
	// gitlab.com, bitbucket for bitbucket.org; any other host needs it set.
	// +kubebuilder:validation:Enum=github;gitlab;gitea;bitbucket
	// +optional
	Provider string `json:"provider,omitempty"`

	// APIURL is the base URL of the forge's REST API. Unset:
	// https://api.github.com, https://<host>/api/v4 (GitLab),
	// https://<host>/api/v1 (Gitea), https://api.bitbucket.org/2.0.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	// +optional
	APIURL string `json:"apiURL,omitempty"`

	// Repository is the repository on the forge: "owner/name" (GitLab: the
	// project's full path, "group/subgroup/name"). Unset: the path of
	// spec.source.git.url without ".git".
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Repository string `json:"repository,omitempty"`

	// SecretRef names a Secret in the Stack's namespace whose key "token" is
	// the forge API token the controller lists changed files, comments and
	// sets commit statuses with (GitHub: pull requests and commit statuses
	// read and write; GitLab: the api scope; Gitea: repository read and
	// write, issue write; Bitbucket Cloud: a repository access token with
	// pull request write).
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`

	// PollInterval lists the open pull requests through the forge's API this
	// often, for repositories that cannot send webhooks; unset: only
	// Receivers' events start previews.
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// ForkLabel is the label that lets a pull request from a fork run its
	// program: a preview runs the pull request's code with the Stack's
	// credentials, so a fork's pull request is previewed only once someone
	// who may label it (write access, on every forge) adds this label, and
	// again on each push while the label stays. Default
	// "stackpilot/preview".
	// +kubebuilder:validation:MaxLength=100
	// +optional
	ForkLabel string `json:"forkLabel,omitempty"`

	// ReviewStacks applies each previewed pull request's head to a stack of
	// its own: the stack name with "-pr-<number>" added, its own state in
	// the same backend, and outputs in the Secret and ConfigMap of
	// spec.outputs with "-pr-<number>" added. It is updated on each push and
	// destroyed (and removed from the backend) when the pull request closes
	// or merges, or the Stack goes. The program must name what it creates
	// after the stack (${pulumi.stack} in YAML), or the review stack and the
	// Stack's own would fight over the same objects.
	// +optional
	ReviewStacks bool `json:"reviewStacks,omitempty"`

	// MaxReviewStacks caps how many review stacks of this Stack exist at
	// once; a pull request beyond it is previewed without one (its comment
	// says so). Default 3.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MaxReviewStacks int32 `json:"maxReviewStacks,omitempty"`
}

// DefaultMaxReviewStacks is spec.previews.maxReviewStacks when unset.
const DefaultMaxReviewStacks = 3

// ReviewStackFinalizer keeps a Stack until its review stacks are destroyed.
const ReviewStackFinalizer = "stackpilot.dev/review-stacks"

// ReviewStack is a pull request's review stack.
type ReviewStack struct {
	// Name is the Pulumi stack's name: the Stack's with "-pr-<number>".
	Name string `json:"name"`
	// Head is the commit it was last applied at ("" when none succeeded).
	// +optional
	Head string `json:"head,omitempty"`
	// Phase: Succeeded (applied at Head), Failed (the last up failed;
	// Message says why), Skipped (spec.previews.maxReviewStacks reached:
	// none was made).
	Phase PreviewPhase `json:"phase"`
	// Message says what happened, without secrets.
	// +kubebuilder:validation:MaxLength=2000
	// +optional
	Message string `json:"message,omitempty"`
}

// PreviewRequest is the value of a preview request annotation: which
// commit of a pull request to preview.
type PreviewRequest struct {
	// Number is the pull (merge) request's number (GitLab: its iid).
	Number int64 `json:"number"`
	// Head is the commit to preview.
	Head string `json:"head"`
	// Ref is the reference of the base repository that holds the head
	// commit (refs/pull/N/head, refs/merge-requests/N/head), or the head
	// branch for a pull request from the same repository.
	Ref string `json:"ref,omitempty"`
	// Base is the branch the pull request merges into.
	Base string `json:"base"`
	// Fork is true when the head is in another repository.
	Fork bool `json:"fork,omitempty"`
	// Labels are the pull request's labels when it was seen (bounded).
	Labels []string `json:"labels,omitempty"`
	// Closed is true once the pull request is closed or merged: its preview
	// is cleaned up and the annotation removed.
	Closed bool `json:"closed,omitempty"`
	// Merged is true when it was closed by merging: its reviewed plan stays
	// for the up the merge starts.
	Merged bool `json:"merged,omitempty"`
	// URL is the pull request's web page, for messages.
	URL string `json:"url,omitempty"`
}

// PreviewPhase is where a pull request's preview stands.
type PreviewPhase string

const (
	// PreviewRunning: the preview of Head runs now.
	PreviewRunning PreviewPhase = "Running"
	// PreviewSucceeded: the preview of Head ran; Changes is what it found.
	PreviewSucceeded PreviewPhase = "Succeeded"
	// PreviewFailed: the preview of Head failed (a program error, a policy
	// violation, credentials); Message says why.
	PreviewFailed PreviewPhase = "Failed"
	// PreviewUnaffected: the pull request changes none of the program's
	// paths; nothing ran and nothing was posted.
	PreviewUnaffected PreviewPhase = "Unaffected"
	// PreviewAwaitingLabel: a pull request from a fork waits for
	// spec.previews.forkLabel before its program runs.
	PreviewAwaitingLabel PreviewPhase = "AwaitingLabel"
	// PreviewError: the forge could not be reached or refused the token;
	// retried with backoff.
	PreviewError PreviewPhase = "Error"
	// PreviewSkipped: a review stack was not made (the cap).
	PreviewSkipped PreviewPhase = "Skipped"
)

// PullRequestPreview is the preview of one open pull request.
type PullRequestPreview struct {
	// Number is the pull request's number.
	Number int64 `json:"number"`
	// Head is the commit previewed (or being previewed).
	// +kubebuilder:validation:MaxLength=64
	Head string `json:"head"`
	// Phase is where the preview stands.
	Phase PreviewPhase `json:"phase"`
	// Message says what the preview found, or why it failed (no secret).
	// +kubebuilder:validation:MaxLength=2000
	// +optional
	Message string `json:"message,omitempty"`
	// Changes are the preview's change counts.
	// +optional
	Changes *ChangeSummary `json:"changes,omitempty"`
	// Plan is the id of the update plan the preview saved: the Stack's up
	// after the merge applies exactly it when the merged program and inputs
	// are those previewed (`stackpilot plan STACK --id ID` prints it).
	// +optional
	Plan string `json:"plan,omitempty"`
	// Operation is the id of the preview's operation (its engine log:
	// `stackpilot logs STACK --operation ID`).
	// +optional
	Operation string `json:"operation,omitempty"`
	// ReviewStack is the pull request's review stack
	// (spec.previews.reviewStacks).
	// +optional
	ReviewStack *ReviewStack `json:"reviewStack,omitempty"`
	// CommentID is the forge's id of the comment this Stack keeps on the
	// pull request, edited in place on each push.
	// +optional
	CommentID string `json:"commentID,omitempty"`
	// Failures counts the forge errors in a row, for the backoff.
	// +optional
	Failures int64 `json:"failures,omitempty"`
	// UpdatedAt is when the phase last changed.
	UpdatedAt metav1.Time `json:"updatedAt"`
}

// RevisionPreviewRequest is the value of the revision preview annotation.
type RevisionPreviewRequest struct {
	// Revision is what to preview: a branch, a tag, a full commit hash, a
	// full reference name (refs/pull/12/head) or pull/12.
	Revision string `json:"revision"`
	// RequestedAt tells one request from the next (RFC 3339).
	RequestedAt string `json:"requestedAt"`
}

// RevisionPreview is the answer to the last revision preview request.
type RevisionPreview struct {
	// Revision is the revision asked for, as given.
	// +kubebuilder:validation:MaxLength=256
	Revision string `json:"revision"`
	// RequestedAt is the request's, so that the asker knows this is its answer.
	// +kubebuilder:validation:MaxLength=64
	RequestedAt string `json:"requestedAt"`
	// Commit is the commit the revision resolved to.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Commit string `json:"commit,omitempty"`
	// Phase: Running, Succeeded or Failed.
	Phase PreviewPhase `json:"phase"`
	// Message says what the preview found, or why it failed (no secret).
	// +kubebuilder:validation:MaxLength=2000
	// +optional
	Message string `json:"message,omitempty"`
	// Changes are the preview's change counts.
	// +optional
	Changes *ChangeSummary `json:"changes,omitempty"`
	// Plan is the id of the plan it kept (`stackpilot plan STACK --id ID`).
	// +optional
	Plan string `json:"plan,omitempty"`
	// Operation is the id of the preview's operation, for its engine log.
	// +optional
	Operation string `json:"operation,omitempty"`
	// UpdatedAt is when the phase last changed.
	UpdatedAt metav1.Time `json:"updatedAt"`
}
