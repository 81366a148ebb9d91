package git

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stackpilot/stackpilot/internal/source"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// sourceRequests reads stackpilot_source_requests_total{kind,host} from the
// controller's registry, as the metrics endpoint serves it.
func sourceRequests(t *testing.T, kind, host string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "stackpilot_source_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["host"] == host {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestSourceMetricsShowSharing: 100 Stacks' worth of resolutions of one
// repository are one ls-remote in stackpilot_source_requests_total, and one
// clone of the commit is one git-fetch; the host label is the host alone,
// though the URL carries a user name and password.
func TestSourceMetricsShowSharing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := testenv.NewGitServer(t, testenv.WithBasicAuth("deployer", "pa55-w0rd"))
	plain := srv.URL("app")
	u, err := url.Parse(plain)
	g.Expect(err).NotTo(HaveOccurred())
	host := u.Host
	u.User = url.UserPassword("deployer", "pa55-w0rd")
	withCreds := u.String()
	srv.Commit(t, "app", "main", map[string]string{"a": "1"}, "1")

	lsBefore := sourceRequests(t, source.KindGitLsRemote, host)
	fetchBefore := sourceRequests(t, source.KindGitFetch, host)

	r := NewResolver()
	var wg sync.WaitGroup
	revs := make([]Revision, 100)
	errs := make([]error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			revs[i], errs[i] = r.Resolve(ctx, withCreds, Ref{Branch: "main"}, nil, time.Hour)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sourceRequests(t, source.KindGitLsRemote, host)-lsBefore).To(Equal(1.0), "100 resolutions of one repository, one ls-remote")

	store := newTestStore(t)
	f := NewFetcher()
	for range 3 {
		_, err := f.Fetch(ctx, withCreds, revs[0], nil, store)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sourceRequests(t, source.KindGitFetch, host)-fetchBefore).To(Equal(1.0), "one commit, one clone")

	out, err := testutil.GatherAndCount(metrics.Registry, "stackpilot_source_fetch_duration_seconds")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(BeNumerically(">=", 2), "durations of both kinds observed")

	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				g.Expect(l.GetValue()).NotTo(Or(ContainSubstring("pa55-w0rd"), ContainSubstring("deployer")), fam.GetName())
				g.Expect(strings.Contains(l.GetValue(), "/app")).To(BeFalse(), fam.GetName())
			}
		}
	}
}
