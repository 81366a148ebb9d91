package dashboard

import (
	"cmp"
	"context"
	"net/http"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The Receivers and Alerts page: each one's state, what it last did and
// what last went wrong. Nothing that could be a credential is shown: not
// a Receiver's webhook path (for type generic, knowing it is enough to
// trigger reconciles) and not an Alert's address (a Slack or Teams
// webhook URL is one).

// ReceiverView is one Receiver.
type ReceiverView struct {
	Namespace string                  `json:"namespace"`
	Name      string                  `json:"name"`
	Type      string                  `json:"type"`
	Events    []string                `json:"events,omitempty"`
	Suspended bool                    `json:"suspended,omitempty"`
	Ready     string                  `json:"ready"` // True, False or Unknown
	Reason    string                  `json:"reason,omitempty"`
	Message   string                  `json:"message,omitempty"`
	LastAt    *metav1.Time            `json:"lastEventAt,omitempty"`
	LastEvent *v1alpha1.ReceiverEvent `json:"lastEvent,omitempty"`
}

// AlertView is one Alert.
type AlertView struct {
	Namespace   string       `json:"namespace"`
	Name        string       `json:"name"`
	Provider    string       `json:"provider"`
	Channel     string       `json:"channel,omitempty"`
	Events      []string     `json:"events,omitempty"`
	Suspended   bool         `json:"suspended,omitempty"`
	Ready       string       `json:"ready"`
	Reason      string       `json:"reason,omitempty"`
	Message     string       `json:"message,omitempty"`
	LastSent    *metav1.Time `json:"lastSent,omitempty"`
	Sent        int64        `json:"sent"`
	Failures    int64        `json:"failures"`
	LastError   string       `json:"lastError,omitempty"`
	LastErrorAt *metav1.Time `json:"lastErrorAt,omitempty"`
}

// readiness is the Ready condition's status, reason and message.
func readiness(conds []metav1.Condition) (string, string, string) {
	c := apimeta.FindStatusCondition(conds, v1alpha1.ReadyCondition)
	if c == nil {
		return string(metav1.ConditionUnknown), "", ""
	}
	return string(c.Status), c.Reason, c.Message
}

func receiverView(r *v1alpha1.Receiver) ReceiverView {
	v := ReceiverView{Namespace: r.Namespace, Name: r.Name, Type: r.Spec.Type, Events: r.Spec.Events,
		Suspended: r.Spec.Suspend, LastAt: r.Status.LastHandledEventAt, LastEvent: r.Status.LastEvent}
	v.Ready, v.Reason, v.Message = readiness(r.Status.Conditions)
	return v
}

func alertView(a *v1alpha1.Alert) AlertView {
	v := AlertView{Namespace: a.Namespace, Name: a.Name, Provider: string(a.Spec.Provider.Type), Channel: a.Spec.Provider.Channel,
		Suspended: a.Spec.Suspend, LastSent: a.Status.LastSent, Sent: a.Status.Sent, Failures: a.Status.Failures,
		LastError: a.Status.LastError, LastErrorAt: a.Status.LastErrorAt}
	for _, e := range a.Spec.Events {
		v.Events = append(v.Events, string(e))
	}
	v.Ready, v.Reason, v.Message = readiness(a.Status.Conditions)
	return v
}

// receivers answers GET /api/receivers[?namespace=]: the Receivers the
// caller may get.
func (s *Server) receivers(w http.ResponseWriter, r *http.Request, c caller) {
	var list v1alpha1.ReceiverList
	items, partial, ok := listVisible(s, w, r, c, resourceReceivers, &list, func() []*v1alpha1.Receiver {
		out := make([]*v1alpha1.Receiver, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out
	})
	if !ok {
		return
	}
	views := make([]ReceiverView, 0, len(items))
	for _, x := range items {
		views = append(views, receiverView(x))
	}
	writeJSON(w, map[string]any{"receivers": views, "partial": partial})
}

// alerts answers GET /api/alerts[?namespace=]: the Alerts the caller may
// get.
func (s *Server) alerts(w http.ResponseWriter, r *http.Request, c caller) {
	var list v1alpha1.AlertList
	items, partial, ok := listVisible(s, w, r, c, resourceAlerts, &list, func() []*v1alpha1.Alert {
		out := make([]*v1alpha1.Alert, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out
	})
	if !ok {
		return
	}
	views := make([]AlertView, 0, len(items))
	for _, x := range items {
		views = append(views, alertView(x))
	}
	writeJSON(w, map[string]any{"alerts": views, "partial": partial})
}

// listVisible lists list (in ?namespace= when given) from the cache and
// keeps what the caller may get, sorted by namespace and name; on an error
// it answers it and ok is false.
func listVisible[T client.Object](s *Server, w http.ResponseWriter, r *http.Request, c caller, resource string, list client.ObjectList, items func() []T) (out []T, partial, ok bool) {
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	var opts []client.ListOption
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		writeError(w, http.StatusInternalServerError, "list the "+resource+": "+err.Error())
		return nil, false, false
	}
	out, partial, err := visible(ctx, s.Access, c.id, resource, items())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil, false, false
	}
	slices.SortFunc(out, func(a, b T) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out, partial, true
}
