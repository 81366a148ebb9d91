package notify

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of stackpilot_alerts_sent_total.
const (
	OutcomeSuccess = "success" // delivered
	OutcomeFailure = "failure" // given up on after every try
	OutcomeDropped = "dropped" // the Alert's queue was full
)

// sentTotal counts messages by provider type and outcome; no label names a
// Stack, an Alert or an address.
var sentTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "stackpilot_alerts_sent_total",
	Help: "Alert messages by provider type and outcome (success, failure after retries, dropped on a full queue).",
}, []string{"provider", "outcome"})

func init() { metrics.Registry.MustRegister(sentTotal) }
