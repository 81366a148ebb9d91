package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// StackView is what the Stack page shows: status as the API server has it
// (conditions, the operations with their durations, the outputs as status
// holds them, secret ones "[secret]"), the source with a link to the
// revision's commit where the host is one the dashboard knows, and no
// spec value beyond the source's address (no config: it may hold secrets).
type StackView struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	States    []State           `json:"states"`
	// Source is the source's address (a Git or OCI URL without
	// credentials, or kind/namespace/name of a Flux source) and dir.
	Source string `json:"source"`
	Dir    string `json:"dir,omitempty"`
	// Revision and CommitURL: the last attempted revision, and the web page
	// of its commit on GitHub, GitLab or Bitbucket.
	Revision   string                `json:"revision,omitempty"`
	CommitURL  string                `json:"commitURL,omitempty"`
	Conditions []metav1.Condition    `json:"conditions,omitempty"`
	Current    *OperationView        `json:"current,omitempty"`
	History    []OperationView       `json:"history,omitempty"`
	Outputs    map[string]string     `json:"outputs,omitempty"`
	Pending    *v1alpha1.PendingPlan `json:"pendingPlan,omitempty"`
	Drift      *v1alpha1.DriftStatus `json:"drift,omitempty"`
	Suspended  bool                  `json:"suspended,omitempty"`
	// ApprovalMode and DriftMode are the spec's, defaults applied;
	// DriftIgnore are the rules that keep drift off the report.
	ApprovalMode v1alpha1.ApprovalMode         `json:"approvalMode"`
	DriftMode    v1alpha1.DriftMode            `json:"driftMode"`
	DriftIgnore  []v1alpha1.DriftIgnoreRule    `json:"driftIgnore,omitempty"`
	Previews     []v1alpha1.PullRequestPreview `json:"previews,omitempty"`
}

// OperationView is one operation with its duration.
type OperationView struct {
	v1alpha1.OperationRecord
	Seconds float64 `json:"seconds,omitempty"`
}

func viewOf(s *v1alpha1.Stack, now time.Time) StackView {
	v := StackView{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, States: statesOf(s),
		Dir: s.Spec.Source.Dir, Conditions: s.Status.Conditions, Outputs: s.Status.Outputs,
		Pending: s.Status.PendingPlan, Drift: s.Status.Drift, Suspended: s.Spec.Suspend,
		ApprovalMode: s.GetApprovalMode(), DriftMode: s.GetDriftMode(), DriftIgnore: s.GetDriftIgnore(),
		Previews: s.Status.Previews, Source: sourceOf(s)}
	src := s.Spec.Source
	v.Revision = s.Status.LastAttemptedRevision
	if v.Revision == "" {
		v.Revision = s.Status.LastAppliedRevision
	}
	if src.Git != nil {
		v.CommitURL = commitURL(src.Git.URL, v.Revision)
	}
	if op := s.Status.CurrentOperation; op != nil {
		v.Current = &OperationView{OperationRecord: *op, Seconds: now.Sub(op.StartedAt.Time).Seconds()}
	}
	for _, h := range s.Status.History {
		o := OperationView{OperationRecord: h}
		if h.FinishedAt != nil {
			o.Seconds = h.FinishedAt.Sub(h.StartedAt.Time).Seconds()
		}
		v.History = append(v.History, o)
	}
	return v
}

var commitRE = regexp.MustCompile(`@sha1:([0-9a-f]{40})$`)

// commitURL is the web page of revision's commit on github.com, gitlab.com
// or bitbucket.org; "" for other hosts, whose pages the dashboard cannot
// know.
func commitURL(repo, revision string) string {
	m := commitRE.FindStringSubmatch(revision)
	if m == nil {
		return ""
	}
	host, path := repoHostPath(repo)
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	if path == "" {
		return ""
	}
	switch host {
	case "github.com":
		return "https://github.com/" + path + "/commit/" + m[1]
	case "gitlab.com":
		return "https://gitlab.com/" + path + "/-/commit/" + m[1]
	case "bitbucket.org":
		return "https://bitbucket.org/" + path + "/commits/" + m[1]
	}
	return ""
}

// repoHostPath splits a Git URL (https://h/p, ssh://git@h/p, git@h:p).
func repoHostPath(raw string) (string, string) {
	if rest, ok := strings.CutPrefix(raw, "git@"); ok {
		host, path, _ := strings.Cut(rest, ":")
		return strings.ToLower(host), path
	}
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", ""
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = rest[at+1:]
	}
	host, path, _ := strings.Cut(rest, "/")
	if h, _, found := strings.Cut(host, ":"); found {
		host = h
	}
	return strings.ToLower(host), path
}

// redactURL drops user info from a URL: credentials are never shown.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	hostPart, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hostPart, "@"); at >= 0 {
		hostPart = hostPart[at+1:]
	}
	if path == "" {
		return scheme + "://" + hostPart
	}
	return scheme + "://" + hostPart + "/" + path
}

// stack answers GET /api/stacks/{namespace}/{name}: 403 for a caller who
// may not get it (before anything of it is read), 404 when there is none.
func (s *Server) stack(w http.ResponseWriter, r *http.Request, c caller) {
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	st := s.readableStack(ctx, w, r, c, "get")
	if st == nil {
		return
	}
	writeJSON(w, viewOf(st, time.Now()))
}

// readableStack is the Stack of the request's path as this replica's cache
// holds it, once the caller was found allowed to verb it (get to see it,
// patch to change it). Otherwise it answers 403, 404 or 500 itself and
// returns nil: a refused caller learns nothing of the Stack, not even
// whether it exists.
func (s *Server) readableStack(ctx context.Context, w http.ResponseWriter, r *http.Request, c caller, verb string) *v1alpha1.Stack {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	ok, err := s.Access.Allowed(ctx, c.id, verb, resourceStacks, ns, name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil
	}
	if !ok {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s may not %s stacks.%s %q in namespace %q", c.id.User, verb, v1alpha1.GroupVersion.Group, name, ns))
		return nil
	}
	var st v1alpha1.Stack
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
		if apierrors.IsNotFound(err) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no Stack %s/%s (or it is another shard's)", ns, name))
			return nil
		}
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil
	}
	return &st
}
