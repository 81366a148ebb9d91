package dashboard

import (
	"context"
	"net/http"
	"net/url"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The engine's own words on the Stack and plan pages: the log of an
// operation (followed while it runs) and the full plan waiting for
// approval, served by the same handlers as `stackpilot logs` and
// `stackpilot plan` once the dashboard has checked the caller.

// logs answers GET /api/stacks/{namespace}/{name}/logs[?operation=<id>][&follow=1]
// as text.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, c caller) {
	if s.Logs == nil {
		writeError(w, http.StatusNotFound, "this controller keeps no engine logs (--logs-bind-address=0)")
		return
	}
	st := s.checkedStack(w, r, c)
	if st == nil {
		return
	}
	s.Logs.ServeStack(w, r, st)
}

// plan answers GET /api/stacks/{namespace}/{name}/plan[/{id}]: the plan's
// document (resource and property names, never values), the pending plan
// without an id. Never the policy input, which holds values: the
// dashboard's query is dropped.
func (s *Server) plan(w http.ResponseWriter, r *http.Request, c caller) {
	if s.Plans == nil {
		writeError(w, http.StatusNotFound, "this controller keeps no plans")
		return
	}
	st := s.checkedStack(w, r, c)
	if st == nil {
		return
	}
	bare := r.Clone(r.Context())
	bare.URL = &url.URL{Path: r.URL.Path}
	s.Plans.ServePlan(w, bare, st, r.PathValue("id"))
}

// checkedStack is readableStack for get, bounded by its own deadline (the
// answer that follows it may stream for long).
func (s *Server) checkedStack(w http.ResponseWriter, r *http.Request, c caller) *v1alpha1.Stack {
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	return s.readableStack(ctx, w, r, c, "get")
}
