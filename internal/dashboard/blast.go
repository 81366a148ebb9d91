package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The blast radius page: for each change waiting to land, every Stack it
// touches with what it would do there, on one page. A change is a commit
// that Stacks hold a pending plan for (Manual and PreviewOnly Stacks), or
// an open pull request that Stacks previewed (spec.previews).

// BlastStack is one Stack a change touches.
type BlastStack struct {
	Namespace string                  `json:"namespace"`
	Name      string                  `json:"name"`
	States    []State                 `json:"states,omitempty"`
	Changes   *v1alpha1.ChangeSummary `json:"changes,omitempty"`
	// Phase is a pull request preview's (Running, Succeeded, Failed, ...);
	// "PlanPending" for a commit's pending plan.
	Phase   string `json:"phase"`
	Plan    string `json:"plan,omitempty"`
	Message string `json:"message,omitempty"`
}

// BlastGroup is one change and the Stacks it touches.
type BlastGroup struct {
	// Kind is "commit" or "pullRequest".
	Kind string `json:"kind"`
	// Source is the repository (a URL without credentials, or a Flux
	// source) the change is in.
	Source string `json:"source"`
	// Revision is the commit (a commit's pending plans) or the pull
	// request's head.
	Revision string `json:"revision"`
	// Number is the pull request's.
	Number int64        `json:"number,omitempty"`
	Stacks []BlastStack `json:"stacks"`
	// Totals add up the Stacks' counts.
	Totals v1alpha1.ChangeSummary `json:"totals"`
}

// buildBlast groups the changes of stacks, largest first.
func buildBlast(stacks []*v1alpha1.Stack) []BlastGroup {
	groups := map[string]*BlastGroup{}
	group := func(kind, source, revision string, number int64) *BlastGroup {
		key := fmt.Sprintf("%s\x00%s\x00%s\x00%d", kind, source, revision, number)
		g := groups[key]
		if g == nil {
			g = &BlastGroup{Kind: kind, Source: source, Revision: revision, Number: number, Stacks: []BlastStack{}}
			groups[key] = g
		}
		return g
	}
	for _, s := range stacks {
		source := sourceOf(s)
		states := statesOf(s)
		if p := s.Status.PendingPlan; p != nil {
			changes := p.Changes
			g := group("commit", source, p.Revision, 0)
			g.Stacks = append(g.Stacks, BlastStack{Namespace: s.Namespace, Name: s.Name, States: states,
				Changes: &changes, Phase: string(StatePlanPending), Plan: p.ID})
		}
		for _, pr := range s.Status.Previews {
			if pr.Phase == v1alpha1.PreviewUnaffected {
				continue
			}
			g := group("pullRequest", previewRepository(s, source), pr.Head, pr.Number)
			g.Stacks = append(g.Stacks, BlastStack{Namespace: s.Namespace, Name: s.Name, States: states,
				Changes: pr.Changes, Phase: string(pr.Phase), Plan: pr.Plan, Message: pr.Message})
		}
	}
	out := make([]BlastGroup, 0, len(groups))
	for _, g := range groups {
		for _, st := range g.Stacks {
			if c := st.Changes; c != nil {
				g.Totals.Create += c.Create
				g.Totals.Update += c.Update
				g.Totals.Replace += c.Replace
				g.Totals.Delete += c.Delete
			}
		}
		slices.SortFunc(g.Stacks, func(a, b BlastStack) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b BlastGroup) int {
		return cmp.Or(cmp.Compare(len(b.Stacks), len(a.Stacks)), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Source, b.Source), cmp.Compare(a.Number, b.Number), cmp.Compare(a.Revision, b.Revision))
	})
	return out
}

// sourceOf is the Stack's source as the pages show it: a URL without
// credentials, or a Flux source's kind/namespace/name.
func sourceOf(s *v1alpha1.Stack) string {
	src := s.Spec.Source
	switch {
	case src.Git != nil:
		return redactURL(src.Git.URL)
	case src.OCI != nil:
		return redactURL(src.OCI.URL)
	case src.SourceRef != nil:
		ns := src.SourceRef.Namespace
		if ns == "" {
			ns = s.Namespace
		}
		return fmt.Sprintf("%s %s/%s", src.SourceRef.Kind, ns, src.SourceRef.Name)
	}
	return ""
}

// previewRepository names a pull request's repository: spec.previews'
// repository when set (owner/name on the forge), else the source.
func previewRepository(s *v1alpha1.Stack, source string) string {
	if p := s.Spec.Previews; p != nil && p.Repository != "" {
		return strings.Trim(p.Repository, "/")
	}
	return source
}

// blast answers GET /api/blast-radius[?namespace=]: the changes waiting to
// land among the Stacks the caller may see.
func (s *Server) blast(w http.ResponseWriter, r *http.Request, c caller) {
	stacks, partial, ok := s.visibleStacks(w, r, c)
	if !ok {
		return
	}
	writeJSON(w, map[string]any{"changes": buildBlast(stacks), "partial": partial})
}
