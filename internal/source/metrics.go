package source

import (
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Request kinds: one per kind of network request the fetchers make.
const (
	KindGitLsRemote   = "git-ls-remote" // list a repository's references
	KindGitFetch      = "git-fetch"     // clone a revision
	KindOCIResolve    = "oci-resolve"   // a tag (or the tags of a semver range) to a digest
	KindOCIVerify     = "oci-verify"    // read an artifact's signatures
	KindOCIPull       = "oci-pull"      // download an artifact
	KindFluxArtifact  = "flux-artifact" // download a Flux source's artifact
	unknownHostLabel  = "unknown"
	maxHostLabelBytes = 253
)

// Source request metrics, served on the controller's metrics endpoint. They
// count requests that left the process, after the caches and the sharing of
// concurrent requests: 100 Stacks on one repository show one ls-remote per
// interval. The host label is the host (and port) alone, never a path, a
// user name or a password.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stackpilot_source_requests_total",
		Help: "Requests to source servers (Git, OCI registries, Flux source artifacts), by kind and host.",
	}, []string{"kind", "host"})
	fetchSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "stackpilot_source_fetch_duration_seconds",
		Help:    "Duration of requests to source servers, by kind.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(requestsTotal, fetchSeconds)
}

// Request counts one request of kind to the server of address (a URL, an
// scp-like Git address or an OCI repository "host/path") and returns the
// function that records its duration when it is over.
func Request(kind, address string) (done func()) {
	requestsTotal.WithLabelValues(kind, Host(address)).Inc()
	start := time.Now()
	return func() { fetchSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds()) }
}

// Host returns the host, with its port when there is one, of a URL
// ("https://user:pw@host:8443/x" is "host:8443"), an scp-like Git address
// ("git@host:org/repo" is "host") or an OCI repository ("host:5000/repo" is
// "host:5000"; "oci://" is allowed). It never returns user information, a
// path or a query, so that it is safe as a metric label; what it cannot
// read is "unknown".
func Host(address string) string {
	a := strings.TrimSpace(address)
	if i := strings.Index(a, "://"); i >= 0 {
		u, err := url.Parse(a)
		if err != nil || u.Host == "" {
			return unknownHostLabel
		}
		return hostLabel(u.Host)
	}
	// No scheme: everything up to the first '/' is the authority, with an
	// optional "user@" (scp-like Git, whose path follows a ':').
	if i := strings.IndexByte(a, '/'); i >= 0 {
		a = a[:i]
	}
	if at := strings.LastIndexByte(a, '@'); at >= 0 {
		a = a[at+1:]
		if i := strings.IndexByte(a, ':'); i >= 0 {
			a = a[:i] // "host:org": the scp-like path, not a port
		}
	}
	return hostLabel(a)
}

// hostLabel checks that h looks like a host[:port] and lower-cases it.
func hostLabel(h string) string {
	h = strings.ToLower(h)
	if h == "" || len(h) > maxHostLabelBytes || strings.ContainsAny(h, "@/?#\\ ") {
		return unknownHostLabel
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		if host == "" {
			return unknownHostLabel
		}
		for _, c := range port {
			if c < '0' || c > '9' {
				return host // "host:org" of an scp-like address: no port
			}
		}
	}
	return h
}

// RequestCount is stackpilot_source_requests_total{kind,host} now, for tests
// that check how many requests reached a server (sharing, caching).
func RequestCount(kind, host string) float64 {
	return counterValue(requestsTotal.WithLabelValues(kind, host))
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
