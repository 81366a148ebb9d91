package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// PlansPath is where PlanHandler is served, on the logs listener (HTTPS).
const PlansPath = "/plans/"

// PlanHandler serves the full plans the PlanStore keeps, as JSON
// (plan.Document: resource and property names, never values):
//
//	GET /plans/<namespace>/<name>       the Stack's pending plan
//	GET /plans/<namespace>/<name>/<id>  plan <id> of the Stack, while it is kept
//
// Only to a caller who may get that Stack (authorizeStackRead, as the logs):
// a plan names every resource and changed property of a stack. Without a
// bearer token it is 401, without get on the Stack 403; anything else is a
// 404 (405 for a method other than GET), each with {"error": "..."}.
type PlanHandler struct {
	Store *PlanStore
	// Reader reads Stacks; Client creates TokenReviews and SubjectAccessReviews.
	Reader client.Reader
	Client client.Client
}

func (h *PlanHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		writePlanError(w, http.StatusMethodNotAllowed, "only GET is served")
		return
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(req.URL.Path, PlansPath), "/"), "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		writePlanError(w, http.StatusNotFound, "use /plans/<namespace>/<name> or /plans/<namespace>/<name>/<plan id>")
		return
	}
	if h.Store == nil || h.Reader == nil || h.Client == nil {
		writePlanError(w, http.StatusServiceUnavailable, "the controller is starting")
		return
	}
	key := client.ObjectKey{Namespace: parts[0], Name: parts[1]}
	if code, msg := authorizeStackRead(req.Context(), h.Client, req, key, "reading its plans"); code != 0 {
		writePlanError(w, code, msg)
		return
	}
	stack := &v1alpha1.Stack{}
	if err := h.Reader.Get(req.Context(), key, stack); err != nil {
		if apierrors.IsNotFound(err) {
			writePlanError(w, http.StatusNotFound, fmt.Sprintf("no Stack %s", key))
			return
		}
		writePlanError(w, http.StatusInternalServerError, fmt.Sprintf("read Stack %s: %v", key, err))
		return
	}
	var id string
	switch {
	case len(parts) == 3:
		id = parts[2]
	case stack.Status.PendingPlan != nil:
		id = stack.Status.PendingPlan.ID
	default:
		writePlanError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no pending plan", key))
		return
	}
	doc, err := h.Store.Document(stack.UID, id)
	if errors.Is(err, errPlanNotFound) || (err == nil && (doc.Namespace != key.Namespace || doc.Name != key.Name)) {
		writePlanError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no plan %q: it was applied, replaced, or never made", key, id))
		return
	}
	if err != nil {
		writePlanError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

func writePlanError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
