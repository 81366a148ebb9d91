package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Operation metrics, served on the controller's metrics endpoint. Labels never
// carry secret values: only the operation type and its outcome.
var (
	operationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stackpilot_operations_total",
		Help: "Pulumi operations run (one runner process each), by type and outcome.",
	}, []string{"type", "outcome"})
	operationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stackpilot_operation_duration_seconds",
		Help:    "Duration of Pulumi operations, by type.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
	}, []string{"type"})
	upsSkipped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "stackpilot_ups_skipped_total",
		Help: "New revisions that changed nothing under a Stack's program paths (spec.source.dir, spec.source.git.include), so no up ran.",
	})
)

func init() {
	metrics.Registry.MustRegister(operationsTotal, operationSeconds, upsSkipped)
}

// Drift metrics. stackpilot_stack_drifted is per Stack (namespace and name
// only); the checks are counted by outcome: drifted, clean or failed.
var (
	stackDrifted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stackpilot_stack_drifted",
		Help: "1 when the Stack's last drift check found drift (ignored properties left out), 0 when it found none.",
	}, []string{"namespace", "name"})
	driftChecksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stackpilot_drift_checks_total",
		Help: "Drift checks run, by outcome: drifted, clean or failed.",
	}, []string{"outcome"})
)

func init() {
	metrics.Registry.MustRegister(stackDrifted, driftChecksTotal)
}
