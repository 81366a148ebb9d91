package stack

import (
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Operation metrics, served on the controller's metrics endpoint. Labels never
// carry secret values: only the operation type and its outcome.
var (
	operationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stackpilot_operations_total",
		Help: "Pulumi operations run (one runner process each), by type and outcome.",
	}, []string{"type", "outcome"})
	operationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "stackpilot_operation_duration_seconds",
		Help: "Duration of Pulumi operations, by type.",
		// Pulumi runs take seconds (nothing to do) to tens of minutes (a
		// cluster, a database): the buckets reach past the default timeout.
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600},
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

// Stack state metrics, per Stack (namespace and name only), set where the
// reconcile settles Ready (summarize.go) and removed when the Stack is
// finalized. operationsRunning counts the runner processes running now, of
// any type (execute, step_operation.go).
var (
	stackReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stackpilot_stack_ready",
		Help: "1 when the Stack's Ready condition is True, 0 when it is False or Unknown (an operation running).",
	}, []string{"namespace", "name"})
	stackSuspended = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stackpilot_stack_suspended",
		Help: "1 when the Stack has spec.suspend set, 0 when not.",
	}, []string{"namespace", "name"})
	operationsRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stackpilot_operations_running",
		Help: "Pulumi operations (runner processes) running now.",
	})
)

func init() {
	metrics.Registry.MustRegister(stackReady, stackSuspended, operationsRunning)
}

// recordStackState sets the Stack's ready and suspended gauges from its
// status as summarize leaves it.
func recordStackState(stack *v1alpha1.Stack) {
	ready, suspended := 0.0, 0.0
	if conditions.IsTrue(stack, v1alpha1.ReadyCondition) {
		ready = 1
	}
	if stack.Spec.Suspend {
		suspended = 1
	}
	stackReady.WithLabelValues(stack.Namespace, stack.Name).Set(ready)
	stackSuspended.WithLabelValues(stack.Namespace, stack.Name).Set(suspended)
}

// forgetStackMetrics drops every per-Stack series of a Stack that is gone.
func forgetStackMetrics(namespace, name string) {
	stackDrifted.DeleteLabelValues(namespace, name)
	stackReady.DeleteLabelValues(namespace, name)
	stackSuspended.DeleteLabelValues(namespace, name)
}

// Pull-request preview metrics (spec.previews): previews by phase reached
// (Succeeded, Failed, Unaffected, AwaitingLabel, Error), and the runner
// processes they started.
var (
	pullRequestPreviews = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stackpilot_pull_request_previews_total",
		Help: "Pull-request previews handled, by the phase they reached: Succeeded, Failed, Unaffected (nothing of the program changed), AwaitingLabel (a fork's), Error (the forge could not be reached).",
	}, []string{"phase"})
	pullRequestPreviewRuns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "stackpilot_pull_request_preview_runs_total",
		Help: "Pull-request previews that started a runner (one pulumi preview each).",
	})
)

func init() {
	metrics.Registry.MustRegister(pullRequestPreviews, pullRequestPreviewRuns)
	for _, p := range []v1alpha1.PreviewPhase{v1alpha1.PreviewSucceeded, v1alpha1.PreviewFailed, v1alpha1.PreviewUnaffected, v1alpha1.PreviewAwaitingLabel, v1alpha1.PreviewError} {
		pullRequestPreviews.WithLabelValues(string(p))
	}
}
