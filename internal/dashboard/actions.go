package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The buttons of the Stack, plan and drift pages. Each is allowed only to a
// caller who may patch that Stack (what `kubectl annotate` or `kubectl
// patch` would need), and each is the same merge patch the CLI writes, so
// the controller cannot tell the dashboard from `stackpilot approve`: the
// controller writes it, on the caller's behalf, with the field manager
// "dashboard:<user>", which the controller records as the approver.

// Action is what a button asks for.
type Action string

const (
	ActionApprove    Action = "approve"
	ActionReconcile  Action = "reconcile"
	ActionSuspend    Action = "suspend"
	ActionResume     Action = "resume"
	ActionCheckDrift Action = "check-drift"
)

// actionTimeout bounds an action, its reads and its patch.
const actionTimeout = 30 * time.Second

// maxFieldManager is the API server's limit on a field manager's length.
const maxFieldManager = 128

// fieldManager names the caller in the Stack's managedFields.
func fieldManager(user string) string {
	m := "dashboard:" + user
	if len(m) > maxFieldManager {
		m = m[:maxFieldManager]
	}
	return m
}

// act answers POST /api/stacks/{namespace}/{name}/{action}. Approve takes
// {"plan": "<id>"}: the plan the page showed, which must still be the
// pending one.
func (s *Server) act(w http.ResponseWriter, r *http.Request, c caller) {
	action := Action(r.PathValue("action"))
	switch action {
	case ActionApprove, ActionReconcile, ActionSuspend, ActionResume, ActionCheckDrift:
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no action %q: approve, reconcile, suspend, resume or check-drift", action))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	if s.readableStack(ctx, w, r, c, "patch") == nil {
		return
	}
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	var (
		msg string
		err error
	)
	switch action {
	case ActionApprove:
		var in struct {
			Plan string `json:"plan"`
		}
		if json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&in) != nil || in.Plan == "" {
			writeError(w, http.StatusBadRequest, `send {"plan": "<id>"}: the id of the plan to approve (status.pendingPlan.id)`)
			return
		}
		msg, err = s.approve(ctx, key, in.Plan, c.id.User)
	default:
		msg, err = s.steer(ctx, key, action, c.id.User)
	}
	if err != nil {
		writeActionError(w, err)
		return
	}
	writeJSON(w, map[string]string{"message": msg})
}

// refusal is an action the Stack's state does not allow (409): no pending
// plan, another plan pending, a mode with nothing to approve.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

func writeActionError(w http.ResponseWriter, err error) {
	var r *refusal
	switch {
	case errors.As(err, &r):
		writeError(w, http.StatusConflict, r.msg)
	case apierrors.IsNotFound(err):
		writeError(w, http.StatusNotFound, "the Stack was deleted")
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// approve sets the approve annotation to plan, if plan is the Stack's
// pending plan as the API server has it now. The patch carries the
// resourceVersion it was read at: had the controller replaced the plan in
// between, the API server refuses it (409) and the approval is decided
// again on the new state, so no other plan than the one shown is ever
// approved.
func (s *Server) approve(ctx context.Context, key client.ObjectKey, plan, user string) (string, error) {
	for attempt := 0; ; attempt++ {
		var st v1alpha1.Stack
		if err := s.APIReader.Get(ctx, key, &st); err != nil {
			return "", err
		}
		if err := approvable(&st, plan); err != nil {
			return "", err
		}
		if st.Annotations[v1alpha1.ApproveAnnotation] == plan {
			return fmt.Sprintf("plan %s was already approved; the controller applies it", plan), nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": st.ResourceVersion,
			"annotations":     map[string]string{v1alpha1.ApproveAnnotation: plan},
		}})
		err := s.Writer.Patch(ctx, &st, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager(user)))
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("approved plan %s; the controller applies it at once", plan), nil
	}
}

// approvable refuses what the CLI's approve refuses, saying why.
func approvable(st *v1alpha1.Stack, plan string) error {
	switch st.GetApprovalMode() {
	case v1alpha1.ApprovalAuto:
		return &refusal{"this Stack's approval mode is Auto: the controller applies changes at once, there is nothing to approve"}
	case v1alpha1.ApprovalPreviewOnly:
		return &refusal{"this Stack is PreviewOnly: its plans are shown, never applied"}
	}
	p := st.Status.PendingPlan
	if p == nil {
		return &refusal{fmt.Sprintf("plan %s is not pending any more (applied, or replaced and applied): reload the page", plan)}
	}
	if p.ID != plan {
		return &refusal{fmt.Sprintf("plan %s is not pending any more: plan %s replaced it (the source or the inputs changed); review that one first", plan, p.ID)}
	}
	return nil
}

// steer asks for a reconcile, a drift check, a suspend or a resume with the
// CLI's merge patches.
func (s *Server) steer(ctx context.Context, key client.ObjectKey, action Action, user string) (string, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	annotations := map[string]string{v1alpha1.ReconcileRequestAnnotation: now, meta.ReconcileRequestAnnotation: now}
	body := map[string]any{}
	var msg string
	switch action {
	case ActionReconcile:
		msg = "asked for a reconcile now"
	case ActionCheckDrift:
		// Stackpilot's annotation only: the drift- prefix is ours, and Flux
		// tooling would read it as a plain request.
		annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: v1alpha1.DriftCheckRequestPrefix + now}
		msg = "asked for a drift check now"
	case ActionSuspend:
		annotations = nil
		body["spec"] = map[string]any{"suspend": true}
		msg = "suspended: no operation starts until it is resumed"
	case ActionResume:
		body["spec"] = map[string]any{"suspend": false}
		msg = "resumed, and asked for a reconcile now"
	}
	if annotations != nil {
		body["metadata"] = map[string]any{"annotations": annotations}
	}
	patch, _ := json.Marshal(body)
	st := &v1alpha1.Stack{}
	st.Namespace, st.Name = key.Namespace, key.Name
	if err := s.Writer.Patch(ctx, st, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(fieldManager(user))); err != nil {
		return "", err
	}
	return strings.TrimSpace(msg), nil
}
