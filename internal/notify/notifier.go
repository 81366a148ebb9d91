package notify

import (
	"context"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Defaults of a Notifier.
const (
	DefaultQueueSize = 100
	DefaultTries     = 5
	DefaultBackoff   = time.Second
	DefaultTimeout   = 10 * time.Second
)

// Notifier watches Stacks' states and sends each change to the Alerts that
// want it. Observing a Stack never blocks: messages go to a bounded queue
// per Alert, drained by one goroutine per Alert, so a slow endpoint delays
// only its own Alert's messages, never a reconcile.
type Notifier struct {
	// Client reads Alerts (cached).
	Client client.Reader
	// Secrets reads Secrets (uncached: no Secret data in memory).
	Secrets  client.Reader
	Recorder record.EventRecorder
	HTTP     *http.Client
	// QueueSize, Tries, Backoff (doubling per try) and Timeout (per request).
	QueueSize int
	Tries     int
	Backoff   time.Duration
	Timeout   time.Duration
	// Updates receives an Alert whose delivery stats changed (buffered;
	// the Alert reconciler writes them to its status).
	Updates chan event.GenericEvent

	mu     sync.Mutex
	ctx    context.Context
	states map[types.NamespacedName]State
	queues map[types.NamespacedName]*queue
	stats  map[types.NamespacedName]*Stats
}

// Stats are an Alert's deliveries since the controller started.
type Stats struct {
	Sent, Failures int64
	LastSent       *metav1.Time
	LastError      string
	LastErrorAt    *metav1.Time
	// Failing is true when the last message was given up on.
	Failing bool
}

type queue struct {
	ch   chan Event
	done chan struct{}
}

// New returns a Notifier with the defaults; denyInternal refuses loopback
// and link-local endpoints (NewHTTPClient).
func New(c, secrets client.Reader, rec record.EventRecorder, denyInternal bool) *Notifier {
	return &Notifier{Client: c, Secrets: secrets, Recorder: rec,
		HTTP:      NewHTTPClient(denyInternal),
		QueueSize: DefaultQueueSize, Tries: DefaultTries, Backoff: DefaultBackoff, Timeout: DefaultTimeout,
		Updates: make(chan event.GenericEvent, 1024)}
}

// Start sets the context the delivery goroutines run in; they end with it.
func (n *Notifier) Start(ctx context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ctx = ctx
	n.init()
}

func (n *Notifier) init() {
	if n.states == nil {
		n.states = map[types.NamespacedName]State{}
		n.queues = map[types.NamespacedName]*queue{}
		n.stats = map[types.NamespacedName]*Stats{}
	}
}

// Observe takes a new look at a Stack. The first look at a Stack only
// records its state; old, when given, is what the Stack was before (an
// update of a Stack not yet seen compares with it).
func (n *Notifier) Observe(ctx context.Context, stack, old *v1alpha1.Stack) {
	key := client.ObjectKeyFromObject(stack)
	n.mu.Lock()
	n.init()
	prev, known := n.states[key]
	if !known && old == nil {
		n.states[key] = Seed(stack)
		n.mu.Unlock()
		return
	}
	if !known {
		prev = Seed(old)
	}
	cur, changes := Next(prev, stack)
	n.states[key] = cur
	n.mu.Unlock()
	if len(changes) == 0 {
		return
	}
	var alerts v1alpha1.AlertList
	if err := n.Client.List(ctx, &alerts, client.InNamespace(stack.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "list Alerts", "namespace", stack.Namespace)
		return
	}
	now := time.Now()
	for i := range alerts.Items {
		a := &alerts.Items[i]
		if a.Spec.Suspend || !Selects(a, stack) {
			continue
		}
		for _, c := range changes {
			if t := c.Wanted(a.Spec.Events); t != "" {
				n.enqueue(client.ObjectKeyFromObject(a), NewEvent(stack, t, now))
			}
		}
	}
}

// Forget drops what is known of a deleted Stack.
func (n *Notifier) Forget(stack types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.states, stack)
}

// Selects says whether the Alert reports on the Stack.
func Selects(a *v1alpha1.Alert, stack *v1alpha1.Stack) bool {
	sel, names := a.Spec.Stacks.Selector, a.Spec.Stacks.Names
	if sel == nil && len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == stack.Name {
			return true
		}
	}
	if sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err == nil && s.Matches(labels.Set(stack.Labels)) {
			return true
		}
	}
	return false
}

// enqueue never blocks: a full queue drops the message and counts it.
func (n *Notifier) enqueue(alert types.NamespacedName, ev Event) {
	n.mu.Lock()
	n.init()
	q := n.queues[alert]
	if q == nil && n.ctx != nil {
		q = &queue{ch: make(chan Event, max(1, n.QueueSize)), done: make(chan struct{})}
		n.queues[alert] = q
		go n.drain(n.ctx, alert, q)
	}
	n.mu.Unlock()
	if q == nil {
		return // not started
	}
	select {
	case q.ch <- ev:
	default:
		sentTotal.WithLabelValues(n.providerOf(alert), OutcomeDropped).Inc()
		n.record(alert, func(s *Stats) {
			s.Failures++
			s.LastError = "queue full (" + itoa(cap(q.ch)) + " messages): dropped a " + string(ev.Type) + " message of Stack " + ev.Namespace + "/" + ev.Name
			s.LastErrorAt, s.Failing = ptrNow(), true
		})
	}
}

// StopAlert ends the delivery goroutine of a deleted Alert and drops its stats.
func (n *Notifier) StopAlert(alert types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if q := n.queues[alert]; q != nil {
		close(q.done)
		delete(n.queues, alert)
	}
	delete(n.stats, alert)
}

// Stats returns a copy of the Alert's delivery stats.
func (n *Notifier) Stats(alert types.NamespacedName) Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.stats[alert]; s != nil {
		return *s
	}
	return Stats{}
}

func (n *Notifier) record(alert types.NamespacedName, f func(*Stats)) {
	n.mu.Lock()
	n.init()
	s := n.stats[alert]
	if s == nil {
		s = &Stats{}
		n.stats[alert] = s
	}
	f(s)
	n.mu.Unlock()
	a := &v1alpha1.Alert{}
	a.Namespace, a.Name = alert.Namespace, alert.Name
	select {
	case n.Updates <- event.GenericEvent{Object: a}:
	default: // a status update is already due
	}
}

func (n *Notifier) providerOf(alert types.NamespacedName) string {
	var a v1alpha1.Alert
	if err := n.Client.Get(context.Background(), alert, &a); err != nil {
		return "unknown"
	}
	return string(a.Spec.Provider.Type)
}

func ptrNow() *metav1.Time { t := metav1.Now(); return &t }
