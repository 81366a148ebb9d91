package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
)

// TestMetricsEndpoint scrapes the controller's /metrics after one Stack
// applied, one failed and one suspended, and checks each series the docs
// name: per-Stack ready and suspended gauges, operation counts and
// durations, no operation running at rest, source requests by host (one
// ls-remote for every Stack on the repository, the host alone though the URL
// carries a password) and the Stack work queue's depth. A deleted Stack's
// series go away.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const user, password = "deployer7", "url-pa55-4711"
	f := newFixture(t, testenv.WithBasicAuth(user, password))
	f.git.Commit(t, "infra", "broken", map[string]string{"app/Pulumi.yaml": bridgeProgram("\n        broken: ${doesNotExist}")}, "broken")
	u, err := url.Parse(f.repoURL)
	g.Expect(err).NotTo(HaveOccurred())
	host := u.Host
	u.User = url.UserPassword(user, password)
	withCreds := u.String()
	f.start(t)

	ready := f.stack("ready", func(s *v1alpha1.Stack) { s.Spec.Source.Git.URL = withCreds })
	failed := f.stack("failed", func(s *v1alpha1.Stack) {
		s.Spec.Source.Git.URL = withCreds
		s.Spec.Source.Git.Ref = &v1alpha1.GitRef{Branch: "broken"}
		s.Spec.RetryInterval = nil // the default (1m): at most one more try in this test
		s.Spec.Outputs = nil
	})
	suspended := f.stack("suspended", func(s *v1alpha1.Stack) {
		s.Spec.Source.Git.URL = withCreds
		s.Spec.Suspend = true
		s.Spec.Outputs = nil
	})
	for _, s := range []*v1alpha1.Stack{ready, failed, suspended} {
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	waitApplied(t, client.ObjectKeyFromObject(ready), f.commit)
	waitNotReady(t, client.ObjectKeyFromObject(failed), v1alpha1.ProgramErrorReason)

	stackSeries := func(name, stack string) (float64, bool) {
		return seriesValue(scrape(t, f), name, map[string]string{"namespace": f.ns, "name": stack})
	}
	g.Eventually(func(g Gomega) {
		m := scrape(t, f)
		for _, c := range []struct {
			metric, stack string
			want          float64
		}{
			{"stackpilot_stack_ready", "ready", 1},
			{"stackpilot_stack_ready", "failed", 0},
			{"stackpilot_stack_suspended", "suspended", 1},
			{"stackpilot_stack_suspended", "ready", 0},
			{"stackpilot_stack_suspended", "failed", 0},
		} {
			v, ok := seriesValue(m, c.metric, map[string]string{"namespace": f.ns, "name": c.stack})
			g.Expect(ok).To(BeTrue(), "%s{name=%q} is served", c.metric, c.stack)
			g.Expect(v).To(Equal(c.want), "%s{name=%q}", c.metric, c.stack)
		}
		running, ok := seriesValue(m, "stackpilot_operations_running", nil)
		g.Expect(ok).To(BeTrue(), "stackpilot_operations_running is served")
		g.Expect(running).To(BeZero(), "no operation runs at rest")
	}, time.Minute, time.Second).Should(Succeed())

	m := scrape(t, f)
	ups, _ := seriesSum(m, "stackpilot_operations_total", map[string]string{"type": "up"})
	succeeded, _ := seriesSum(m, "stackpilot_operations_total", map[string]string{"type": "up", "outcome": "succeeded"})
	failedUps, _ := seriesSum(m, "stackpilot_operations_total", map[string]string{"type": "up", "outcome": "failed"})
	g.Expect(succeeded).To(BeNumerically(">=", 1), "the applied Stack's up")
	g.Expect(failedUps).To(BeNumerically(">=", 1), "the failed Stack's up")
	hist := m["stackpilot_operation_duration_seconds"]
	g.Expect(hist).NotTo(BeNil(), "the duration histogram is served")
	var count uint64
	var sum float64
	for _, s := range hist.GetMetric() {
		if labelsMatch(s, map[string]string{"type": "up"}) {
			count += s.GetHistogram().GetSampleCount()
			sum += s.GetHistogram().GetSampleSum()
		}
	}
	g.Expect(float64(count)).To(BeNumerically(">=", ups), "every up is in the duration histogram")
	g.Expect(sum).To(BeNumerically(">", 0))

	// One ls-remote served every Stack on the repository (the failed one's
	// branch too); one clone per commit. The host label is the host alone.
	lsRemotes, ok := seriesValue(m, "stackpilot_source_requests_total", map[string]string{"kind": "git-ls-remote", "host": host})
	g.Expect(ok).To(BeTrue(), "git-ls-remote requests to %s are counted", host)
	g.Expect(lsRemotes).To(Equal(1.0), "three Stacks on one repository, one ls-remote")
	fetches, _ := seriesValue(m, "stackpilot_source_requests_total", map[string]string{"kind": "git-fetch", "host": host})
	g.Expect(fetches).To(Equal(2.0), "two commits, two clones")
	g.Expect(host).To(HavePrefix("127.0.0.1:"))
	_, ok = seriesSum(m, "stackpilot_source_fetch_duration_seconds", map[string]string{"kind": "git-ls-remote"})
	g.Expect(ok).To(BeTrue(), "source fetch durations are served")

	depth, ok := seriesValue(m, "workqueue_depth", map[string]string{"name": "stack"})
	g.Expect(ok).To(BeTrue(), "workqueue_depth{name=\"stack\"} is served")
	g.Expect(depth).To(BeNumerically(">=", 0))

	raw := scrapeText(t, f)
	for _, secret := range []string{password, user, passphrase} {
		g.Expect(raw).NotTo(ContainSubstring(secret), "no secret in any series")
	}

	// A deleted Stack's series go.
	g.Expect(env.Client.Delete(ctx, ready)).To(Succeed())
	g.Eventually(func() bool {
		_, ok := stackSeries("stackpilot_stack_ready", "ready")
		return ok
	}, time.Minute, time.Second).Should(BeFalse(), "the deleted Stack's stackpilot_stack_ready is gone")
	_, ok = stackSeries("stackpilot_stack_suspended", "ready")
	g.Expect(ok).To(BeFalse(), "the deleted Stack's stackpilot_stack_suspended is gone")
	_, ok = stackSeries("stackpilot_stack_ready", "failed")
	g.Expect(ok).To(BeTrue(), "the other Stacks' series stay")
}

// scrapeText returns the controller's /metrics page.
func scrapeText(t *testing.T, f *fixture) string {
	t.Helper()
	resp, err := http.Get("http://" + f.ctrl.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %v %s", err, resp.Status)
	}
	return string(data)
}

// scrape parses the controller's /metrics page.
func scrape(t *testing.T, f *fixture) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	m, err := p.TextToMetricFamilies(strings.NewReader(scrapeText(t, f)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return m
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// seriesSum adds the values of a counter's or gauge's series whose labels
// include want, and says whether there was any.
func seriesSum(m map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	fam := m[name]
	if fam == nil {
		return 0, false
	}
	var sum float64
	found := false
	for _, s := range fam.GetMetric() {
		if !labelsMatch(s, want) {
			continue
		}
		found = true
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Histogram != nil:
			sum += float64(s.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// seriesValue is seriesSum for want naming one series.
func seriesValue(m map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	return seriesSum(m, name, want)
}
