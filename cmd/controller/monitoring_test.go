package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"
)

// monitoringDir holds the Grafana dashboard and the PrometheusRule.
const monitoringDir = "../../config/monitoring"

// TestMonitoringUsesRegisteredMetrics: every metric the dashboard and the
// alert rules query is one this binary registers on its metrics endpoint
// (ours and controller-runtime's), so that a renamed metric cannot leave a
// silent empty panel or an alert that never fires.
func TestMonitoringUsesRegisteredMetrics(t *testing.T) {
	exprs := append(dashboardExprs(t), ruleExprs(t)...)
	if len(exprs) < 10 {
		t.Fatalf("found only %d queries in %s: the files were not read as expected", len(exprs), monitoringDir)
	}
	used := map[string][]string{} // metric name -> the queries using it
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("query %q names no metric", e)
		}
		for _, n := range names {
			used[n] = append(used[n], e)
		}
	}
	for _, want := range []string{"stackpilot_stack_ready", "stackpilot_operations_total", "stackpilot_operation_duration_seconds_bucket",
		"stackpilot_operations_running", "stackpilot_source_requests_total", "stackpilot_stack_drifted", "workqueue_depth",
		"stackpilot_receiver_events_total", "stackpilot_alerts_sent_total"} {
		if _, ok := used[want]; !ok {
			t.Errorf("the dashboard and rules do not show %s", want)
		}
	}
	for name, queries := range used {
		if registered(name) {
			continue
		}
		t.Errorf("%s is not a metric the controller registers; used in %q", name, queries[0])
	}
}

// registered says whether the controller's registry has a collector for the
// metric name, or for the histogram or summary whose series it is: a metric
// with no samples yet is not in Gather's output, so the probe registers a
// collector of that name and looks for the refusal.
func registered(name string) bool {
	has := func(n string) bool {
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: n, Help: "probe"})
		if err := metrics.Registry.Register(probe); err != nil {
			return true
		}
		metrics.Registry.Unregister(probe)
		return false
	}
	if !validName.MatchString(name) {
		return false
	}
	if has(name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && has(base) {
			return true
		}
	}
	return false
}

var (
	validName   = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	identifier  = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	quoted      = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers    = regexp.MustCompile(`\{[^}]*\}`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	grouping    = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	labelValues = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	keywords    = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// metricNames returns the metric names a PromQL expression selects: the
// identifiers left once strings, label matchers, ranges and grouping
// clauses are removed, that are neither functions nor keywords.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		return []string{m[1]} // a Grafana variable query
	}
	e := quoted.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range identifier.FindAllStringIndex(e, -1) {
		tok := e[loc[0]:loc[1]]
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.' || e[loc[0]-1] == '$') {
			continue // the exponent or unit of a number, or a Grafana variable
		}
		if strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "(") {
			continue // a function
		}
		if slices.Contains(keywords, strings.ToLower(tok)) {
			continue
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (type, outcome) (rate(stackpilot_operations_total{outcome="failed", x=~"a(b)"}[$__rate_interval]))`, []string{"stackpilot_operations_total"}},
		{`histogram_quantile(0.9, sum by (le) (rate(a_bucket[5m]))) > 1e3`, []string{"a_bucket"}},
		{`(x == 0) unless on (namespace, name) (y == 1) or vector(0)`, []string{"x", "y"}},
		{`label_values(stackpilot_stack_ready, namespace)`, []string{"stackpilot_stack_ready"}},
		{`count(up{job="$job"} offset 5m) and bool z`, []string{"up", "z"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// dashboardExprs returns every query of the dashboard: panel targets (rows
// included) and query variables.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var out []string
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("panel %q has a target without expr", p.Title)
				}
				out = append(out, tg.Expr)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				t.Fatalf("dashboard variable query %s: %v", v.Query, err)
			}
			q.Query = s
		}
		out = append(out, q.Query)
	}
	return out
}

type dashPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// ruleExprs returns the PrometheusRule's expressions, checking that the two
// alerts the docs promise are there.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
					For   string `json:"for"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is %s %s, want monitoring.coreos.com/v1 PrometheusRule", rule.APIVersion, rule.Kind)
	}
	alerts := map[string]string{}
	var out []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = r.For
			out = append(out, r.Expr)
		}
	}
	if alerts["StackpilotStackNotReady"] != "30m" {
		t.Errorf("StackpilotStackNotReady: for %q, want 30m (alerts: %v)", alerts["StackpilotStackNotReady"], alerts)
	}
	if _, ok := alerts["StackpilotOperationsFailing"]; !ok {
		t.Errorf("no StackpilotOperationsFailing alert (alerts: %v)", alerts)
	}
	return out
}
