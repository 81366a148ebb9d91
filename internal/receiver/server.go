package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/source/git"
)

// MaxBodySize is the largest webhook body read; a larger one is 413.
const MaxBodySize = 1 << 20

// requestTimeout bounds the work one accepted event does (listing and
// patching Stacks), whatever the sender's patience.
const requestTimeout = 30 * time.Second

// Server answers webhook requests on /hook/<path>.
type Server struct {
	Index     *Index
	Requester *Requester
	// Status, when set, records the last accepted event on the Receiver.
	Status client.StatusWriter
	Log    logr.Logger

	replays *replayCache
}

// NewServer returns a Server over index that asks Stacks through q.
func NewServer(index *Index, q *Requester, status client.StatusWriter, log logr.Logger) *Server {
	return &Server{Index: index, Requester: q, Status: status, Log: log, replays: newReplayCache()}
}

// result is the JSON body of every answer: what was done, never why a
// signature failed beyond that it did.
type result struct {
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
	Stacks  int    `json:"stacks,omitempty"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	t, ok := s.Index.Lookup(req.URL.Path)
	if !ok {
		s.answer(w, "unknown", http.StatusNotFound, result{Outcome: OutcomeInvalid, Message: "no Receiver serves this path"})
		return
	}
	log := s.Log.WithValues("receiver", t.Key.String(), "type", t.Type)
	if req.Method != http.MethodPost {
		s.answer(w, t.Type, http.StatusMethodNotAllowed, result{Outcome: OutcomeInvalid, Message: "POST only"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBodySize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.answer(w, t.Type, http.StatusRequestEntityTooLarge, result{Outcome: OutcomeTooLarge, Message: "the body is over 1 MiB"})
			return
		}
		s.answer(w, t.Type, http.StatusBadRequest, result{Outcome: OutcomeInvalid, Message: "could not read the body"})
		return
	}
	if err := Verify(t.Type, req.Header, body, t.Token, t.AcceptUnsigned); err != nil {
		log.Info("refused a webhook request: missing or invalid signature")
		s.answer(w, t.Type, http.StatusUnauthorized, result{Outcome: OutcomeUnauthorized, Message: err.Error()})
		return
	}
	ev, err := Parse(t.Type, req.Header, body)
	if err != nil {
		s.answer(w, t.Type, http.StatusBadRequest, result{Outcome: OutcomeInvalid, Message: err.Error()})
		return
	}
	if ev.Ping {
		s.answer(w, t.Type, http.StatusOK, result{Outcome: OutcomeIgnored, Message: "pong"})
		return
	}
	// Only after the signature: an unsigned request must not poison the
	// cache with a delivery still to come.
	replay := replayKey(t.Key.String(), body)
	if s.replays.seenBefore(replay) {
		s.answer(w, t.Type, http.StatusOK, result{Outcome: OutcomeReplayed, Message: "this delivery was handled already"})
		return
	}
	if t.Suspend {
		s.answer(w, t.Type, http.StatusOK, result{Outcome: OutcomeIgnored, Message: "the Receiver is suspended"})
		return
	}
	if !wanted(t, ev.Name) {
		s.answer(w, t.Type, http.StatusOK, result{Outcome: OutcomeIgnored, Message: "event " + truncate(ev.Name, 100) + " is not in spec.events"})
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeout)
	defer cancel()
	n, err := s.Requester.Request(ctx, t, ev)
	if err != nil {
		s.replays.forget(replay) // a redelivery may succeed
		log.Error(err, "could not request reconciles")
		s.answer(w, t.Type, http.StatusInternalServerError, result{Outcome: OutcomeInvalid, Message: "could not request reconciles; retry"})
		return
	}
	log.Info("webhook event accepted", "event", truncate(ev.Name, 100), "stacks", n)
	s.recordStatus(t, ev, n)
	s.answer(w, t.Type, http.StatusOK, result{Outcome: OutcomeAccepted, Stacks: n})
}

func (s *Server) answer(w http.ResponseWriter, typ string, code int, r result) {
	EventsTotal.WithLabelValues(typ, r.Outcome).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(r)
}

// wanted applies spec.events (or the type's defaults), case-insensitively.
func wanted(t *Target, name string) bool {
	events := t.Events
	if len(events) == 0 {
		events = DefaultEvents(t.Type)
	}
	if len(events) == 0 {
		return true
	}
	for _, e := range events {
		if strings.EqualFold(e, name) {
			return true
		}
	}
	return false
}

// recordStatus writes the last accepted event to the Receiver's status, in
// the background: the sender's answer does not wait for it.
func (s *Server) recordStatus(t *Target, ev Event, stacks int) {
	if s.Status == nil {
		return
	}
	summary := &v1alpha1.ReceiverEvent{Event: truncate(ev.Name, 100), Stacks: int32(min(stacks, 1<<30))}
	for _, r := range ev.Repositories {
		// Normalised: no user info of a URL reaches the status.
		n := git.NormalizeURL(r)
		if ev.OCI {
			n = NormalizeOCIRepository(r)
		}
		if n != "" {
			summary.Repository = truncate(n, 512)
			break
		}
	}
	switch {
	case len(ev.Refs) > 0:
		summary.Ref = truncate(ev.Refs[0], 256)
	case len(ev.Tags) > 0:
		summary.Ref = truncate(ev.Tags[0], 256)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rcv := &v1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Namespace: t.Key.Namespace, Name: t.Key.Name}}
		now := metav1.Now()
		patch := map[string]any{"status": map[string]any{"lastHandledEventAt": now, "lastEvent": summary}}
		data, _ := json.Marshal(patch)
		if err := s.Status.Patch(ctx, rcv, client.RawPatch("application/merge-patch+json", data)); err != nil {
			s.Log.V(1).Info("could not record the last event on the Receiver", "receiver", t.Key.String(), "error", err.Error())
		}
	}()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
