package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/wire"
)

// PlanHandler serves the full plans the plan.Store keeps, as JSON
// (plan.Document: resource and property names, never values):
//
//	GET /plans/<namespace>/<name>       the Stack's pending plan
//	GET /plans/<namespace>/<name>/<id>  plan <id> of the Stack, while it is kept
//
// With ?content=policy-input either serves the plan's plan.PolicyInput
// instead: Pulumi's update plan and the inputs before it, which hold
// values (non-secret inputs; secrets masked), for `stackpilot policy test
// --stack`. Reading it needs the same get on the Stack: it shows what
// `pulumi preview --diff` shows a reader of the stack.
//
// Only to a caller who may get that Stack (readableStack, as the logs):
// a plan names every resource and changed property of a stack. Without a
// bearer token it is 401, without get on the Stack 403; anything else is a
// 404 (405 for a method other than GET), each with {"error": "..."}.
type PlanHandler struct {
	Store *plan.Store
	// Reviews keeps the plans of pull requests' previews, whose ids start
	// "review-" (served like the others; none is ever pending).
	Reviews *plan.Store
	// Reader reads Stacks; Client creates TokenReviews and SubjectAccessReviews.
	Reader client.Reader
	Client client.Client
}

func (h *PlanHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		wire.WriteError(w, http.StatusMethodNotAllowed, "only GET is served")
		return
	}
	parts := wire.SplitPath(wire.PlansPath, req.URL.Path)
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		wire.WriteError(w, http.StatusNotFound, "use /plans/<namespace>/<name> or /plans/<namespace>/<name>/<plan id>")
		return
	}
	if h.Store == nil || h.Reader == nil || h.Client == nil {
		wire.WriteError(w, http.StatusServiceUnavailable, "the controller is starting")
		return
	}
	key := client.ObjectKey{Namespace: parts[0], Name: parts[1]}
	stack, code, msg := readableStack(req.Context(), h.Reader, h.Client, req, key, "reading its plans")
	if stack == nil {
		wire.WriteError(w, code, msg)
		return
	}
	var id string
	if len(parts) == 3 {
		id = parts[2]
	}
	h.ServePlan(w, req, stack, id)
}

// ServePlan answers with plan id of stack (its pending plan when id is
// ""), which the caller was found allowed to read: the dashboard's pages
// call it after their own checks.
func (h *PlanHandler) ServePlan(w http.ResponseWriter, req *http.Request, stack *v1alpha1.Stack, id string) {
	key := client.ObjectKeyFromObject(stack)
	if id == "" {
		if stack.Status.PendingPlan == nil {
			wire.WriteError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no pending plan", key))
			return
		}
		id = stack.Status.PendingPlan.ID
	}
	var body any
	var ns, name string
	store := h.Store
	if strings.HasPrefix(id, ReviewPlanPrefix) && h.Reviews != nil {
		store = h.Reviews
	}
	switch content := req.URL.Query().Get(wire.ContentParam); content {
	case "":
		doc, err := store.Document(stack.UID, id)
		if err == nil {
			body, ns, name = doc, doc.Namespace, doc.Name
		}
		h.answer(w, key, id, body, ns, name, err)
	case wire.PolicyInputContent:
		in, err := store.PolicyInput(stack.UID, id)
		if err == nil {
			body, ns, name = in, in.Namespace, in.Name
		}
		h.answer(w, key, id, body, ns, name, err)
	default:
		wire.WriteError(w, http.StatusBadRequest, fmt.Sprintf("%s=%q: want %s, or none for the plan's document", wire.ContentParam, content, wire.PolicyInputContent))
	}
}

// ReviewPlanPrefix starts the id of a pull request's reviewed plan.
const ReviewPlanPrefix = "review-"

// answer writes body, plan id of the Stack key as the store read it (for
// the Stack ns/name), or the store's error.
func (h *PlanHandler) answer(w http.ResponseWriter, key client.ObjectKey, id string, body any, ns, name string, err error) {
	if errors.Is(err, plan.ErrNotFound) || (err == nil && (ns != key.Namespace || name != key.Name)) {
		wire.WriteError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no plan %q: it was applied, replaced, or never made", key, id))
		return
	}
	if err != nil {
		wire.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", wire.ContentJSON)
	_ = json.NewEncoder(w).Encode(body)
}
