package receiver

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of a webhook request, the outcome label of EventsTotal.
const (
	OutcomeAccepted     = "accepted"
	OutcomeUnauthorized = "unauthorized"
	OutcomeTooLarge     = "too_large"
	OutcomeReplayed     = "replayed"
	OutcomeIgnored      = "ignored"
	OutcomeInvalid      = "invalid"
)

// EventsTotal counts webhook requests by Receiver type and outcome. The
// type is "unknown" for a path no Receiver serves. No label carries a path,
// a name or a secret.
var EventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "stackpilot_receiver_events_total",
	Help: "Webhook requests received, by Receiver type and outcome (accepted, unauthorized, too_large, replayed, ignored, invalid).",
}, []string{"type", "outcome"})

func init() {
	metrics.Registry.MustRegister(EventsTotal)
	// Every series exists from the start at 0, so that rates and alerts
	// work before the first event of a kind.
	for _, typ := range []string{"github", "gitlab", "bitbucket", "gitea", "generic-hmac", "generic", "oci"} {
		for _, outcome := range []string{OutcomeAccepted, OutcomeUnauthorized, OutcomeTooLarge, OutcomeReplayed, OutcomeIgnored, OutcomeInvalid} {
			EventsTotal.WithLabelValues(typ, outcome)
		}
	}
}
