package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/logstore"
)

const (
	// LogsPath is where LogsHandler is served on the logs listener.
	LogsPath = "/logs/"
	// TokenHeader carries the caller's bearer token. Why not Authorization:
	// the API server's service proxy authenticates the caller with that
	// header and then strips it, so it never reaches the controller.
	TokenHeader = "X-Stackpilot-Token"
	// OperationHeader names the operation whose log is served.
	OperationHeader = "X-Stackpilot-Operation"
)

// LogsHandler serves the engine logs the log store keeps, as text:
//
//	GET /logs/<namespace>/<name>[?operation=<id>][&follow=1]
//
// The caller is whoever the bearer token in X-Stackpilot-Token (else in
// Authorization, for a caller that reaches the controller directly) is, as
// a TokenReview says; a SubjectAccessReview decides whether they may get
// that Stack. Without operation, the log of the Stack's last operation that
// has one; with follow, a running operation's log is streamed until it ends.
// Errors are JSON {"error": "..."}: 401 (no or a bad token), 403 (not
// allowed), 404 (no such Stack or log).
type LogsHandler struct {
	Store *logstore.Store
	// Reader reads Stacks; Client creates TokenReviews and SubjectAccessReviews.
	Reader client.Reader
	Client client.Client
	// Poll is how often a followed log is read again (default 250ms).
	Poll time.Duration
}

func (h *LogsHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		writePlanError(w, http.StatusMethodNotAllowed, "only GET is served")
		return
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(req.URL.Path, LogsPath), "/"), "/")
	if !strings.HasPrefix(req.URL.Path, LogsPath) || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		writePlanError(w, http.StatusNotFound, "use /logs/<namespace>/<name>[?operation=<id>][&follow=1]")
		return
	}
	if h.Store == nil || h.Reader == nil || h.Client == nil {
		writePlanError(w, http.StatusServiceUnavailable, "the controller is starting")
		return
	}
	ctx := req.Context()
	key := client.ObjectKey{Namespace: parts[0], Name: parts[1]}
	if code, msg := authorizeStackRead(ctx, h.Client, req, key, "reading its logs"); code != 0 {
		writePlanError(w, code, msg)
		return
	}
	stack := &v1alpha1.Stack{}
	if err := h.Reader.Get(ctx, key, stack); err != nil {
		if apierrors.IsNotFound(err) {
			writePlanError(w, http.StatusNotFound, fmt.Sprintf("no Stack %s", key))
			return
		}
		writePlanError(w, http.StatusInternalServerError, fmt.Sprintf("read Stack %s: %v", key, err))
		return
	}
	uid := string(stack.UID)
	id := req.URL.Query().Get("operation")
	switch {
	case id != "" && !h.Store.Has(uid, id):
		writePlanError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no log of operation %q: the controller keeps the last %d operations' logs (see status.history), and none from before it kept logs", key, id, logstore.DefaultKeep))
		return
	case id == "":
		if id = h.lastLogged(stack); id == "" {
			writePlanError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no operation log yet", key))
			return
		}
	}
	f, err := h.Store.Open(uid, id)
	if err != nil {
		writePlanError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no log of operation %q: %v", key, id, err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(OperationHeader, id)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	follow := req.URL.Query().Get("follow")
	if follow != "1" && follow != "true" {
		_, _ = io.Copy(w, f)
		return
	}
	h.follow(ctx, w, f, uid, id)
}

// follow copies the log as it grows until its operation ends (or the
// caller goes). Whether it runs is asked before each read: once it is not,
// the runner has closed the file, and that read is the last.
func (h *LogsHandler) follow(ctx context.Context, w http.ResponseWriter, f io.Reader, uid, id string) {
	rc := http.NewResponseController(w)
	poll := h.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	for {
		running := h.Store.Running(uid, id)
		n, err := io.Copy(w, f)
		if err != nil {
			return
		}
		if n > 0 {
			_ = rc.Flush()
		}
		if !running {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
}

// lastLogged is the newest operation of the Stack that has a log: the
// running one, else the newest in its history, else the newest the store has.
func (h *LogsHandler) lastLogged(stack *v1alpha1.Stack) string {
	uid := string(stack.UID)
	var ids []string
	if op := stack.Status.CurrentOperation; op != nil {
		ids = append(ids, op.ID)
	}
	for _, rec := range stack.Status.History {
		ids = append(ids, rec.ID)
	}
	for _, id := range ids {
		if h.Store.Has(uid, id) {
			return id
		}
	}
	if stored, err := h.Store.List(uid); err == nil && len(stored) > 0 {
		return stored[0]
	}
	return ""
}
