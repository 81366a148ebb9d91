package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/logstore"
	"github.com/stackpilot/stackpilot/internal/wire"
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
		wire.WriteError(w, http.StatusMethodNotAllowed, "only GET is served")
		return
	}
	parts := wire.SplitPath(wire.LogsPath, req.URL.Path)
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		wire.WriteError(w, http.StatusNotFound, "use /logs/<namespace>/<name>[?operation=<id>][&follow=1]")
		return
	}
	if h.Store == nil || h.Reader == nil || h.Client == nil {
		wire.WriteError(w, http.StatusServiceUnavailable, "the controller is starting")
		return
	}
	key := client.ObjectKey{Namespace: parts[0], Name: parts[1]}
	stack, code, msg := readableStack(req.Context(), h.Reader, h.Client, req, key, "reading its logs")
	if stack == nil {
		wire.WriteError(w, code, msg)
		return
	}
	h.ServeStack(w, req, stack)
}

// ServeStack answers with a log of stack, which the caller was found
// allowed to read: the dashboard's pages call it after their own checks.
func (h *LogsHandler) ServeStack(w http.ResponseWriter, req *http.Request, stack *v1alpha1.Stack) {
	ctx := req.Context()
	key := client.ObjectKeyFromObject(stack)
	uid := string(stack.UID)
	id := req.URL.Query().Get(wire.OperationParam)
	switch {
	case id != "" && !h.Store.Has(uid, id):
		wire.WriteError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no log of operation %q: the controller keeps the last %d operations' logs (see status.history), and none from before it kept logs", key, id, logstore.DefaultKeep))
		return
	case id == "":
		if id = h.lastLogged(stack); id == "" {
			wire.WriteError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no operation log yet", key))
			return
		}
	}
	f, err := h.Store.Open(uid, id)
	if err != nil {
		wire.WriteError(w, http.StatusNotFound, fmt.Sprintf("Stack %s has no log of operation %q: %v", key, id, err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", wire.ContentText)
	w.Header().Set(wire.OperationHeader, id)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if !wire.Follows(req.URL.Query()) {
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
