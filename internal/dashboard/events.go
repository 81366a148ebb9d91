package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Live pages: the controller's informers tell the Hub of every change of
// a Stack, a Receiver or an Alert in its cache, and the Hub tells each open
// page (GET /api/events, server-sent events) of the changes its caller may
// see. A change carries only the kind and the name: the page reads again
// what it shows, through the same access checks as any read.

// Change names an object that changed.
type Change struct {
	Kind      string `json:"kind"` // Stack, Receiver or Alert
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Hub fans changes out to the pages' streams.
type Hub struct {
	mu   sync.Mutex
	subs map[*subscription]struct{}
}

// subscription is one page's stream: a bounded queue, and whether changes
// were dropped because the page read too slowly (it then reads everything
// again).
type subscription struct {
	ch      chan Change
	dropped bool
}

// subscriptionBuffer bounds a slow page's backlog.
const subscriptionBuffer = 256

// Publish tells every stream of c; it never blocks on a slow page.
func (h *Hub) Publish(c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.ch <- c:
		default:
			s.dropped = true
		}
	}
}

func (h *Hub) subscribe() *subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[*subscription]struct{}{}
	}
	s := &subscription{ch: make(chan Change, subscriptionBuffer)}
	h.subs[s] = struct{}{}
	return s
}

func (h *Hub) unsubscribe(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

// takeDropped says whether changes were dropped since the last call.
func (h *Hub) takeDropped(s *subscription) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := s.dropped
	s.dropped = false
	return d
}

// Watch publishes the changes of Stacks, Receivers and Alerts that the
// manager's cache sees.
func (h *Hub) Watch(ctx context.Context, c cache.Cache) error {
	for kind, obj := range map[string]client.Object{"Stack": &v1alpha1.Stack{}, "Receiver": &v1alpha1.Receiver{}, "Alert": &v1alpha1.Alert{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watch %ss for the dashboard: %w", kind, err)
		}
		publish := func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if m, ok := o.(client.Object); ok {
				h.Publish(Change{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    publish,
			UpdateFunc: func(_, o any) { publish(o) },
			DeleteFunc: publish,
		}); err != nil {
			return fmt.Errorf("watch %ss for the dashboard: %w", kind, err)
		}
	}
	return nil
}

// keepAlive is how often an idle stream sends a comment: proxies keep it
// open, and the page learns of a lost connection within it.
var keepAlive = 15 * time.Second

// kindResource is the resource a change's kind is checked against.
var kindResource = map[string]string{"Stack": resourceStacks, "Receiver": resourceReceivers, "Alert": resourceAlerts}

// events answers GET /api/events: a stream of "change" events, one per
// change of an object the caller may get ({"kind", "namespace", "name"}),
// and "resync" when some were dropped (read everything again). The
// browser's EventSource reconnects by itself after a lost connection.
func (s *Server) events(w http.ResponseWriter, r *http.Request, c caller) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // nginx in front must not hold events back
	w.WriteHeader(http.StatusOK)
	sub := s.Hub.subscribe()
	defer s.Hub.unsubscribe(sub)
	send := func(event, data string) bool {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if _, err := fmt.Fprint(w, "retry: 3000\n\n"); err != nil || !send("hello", `{}`) {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if c.session != nil && s.sessions.get(c.session.id) == nil {
				send("signedout", `{}`)
				return
			}
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case ch := <-sub.ch:
			if s.Hub.takeDropped(sub) {
				if !send("resync", `{}`) {
					return
				}
			}
			ok, err := s.Access.mayGet(ctx, c.id, kindResource[ch.Kind], ch.Namespace, ch.Name)
			if err != nil || !ok {
				continue
			}
			data, _ := json.Marshal(ch)
			if !send("change", string(data)) {
				return
			}
		}
	}
}
