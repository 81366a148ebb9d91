package testenv

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is go-containerregistry's in-memory OCI registry on 127.0.0.1
// (plain HTTP), with optional basic authentication, request counting and
// blob tampering in front.
type Registry struct {
	srv      *httptest.Server
	cfg      registryConfig
	requests atomic.Int64

	mu       sync.Mutex
	lookups  map[string]int // "repo:tag" -> HEAD/GET manifests by tag
	listings map[string]int // repo -> GET tags/list
	tamper   map[string]bool
}

type registryConfig struct {
	referrers      bool
	user, password string
}

// RegistryOption configures NewRegistry.
type RegistryOption func(*registryConfig)

// WithReferrers turns the OCI 1.1 referrers API on or off (off by default,
// so clients must fall back to the referrers tag schema).
func WithReferrers(on bool) RegistryOption {
	return func(c *registryConfig) { c.referrers = on }
}

// WithRegistryBasicAuth makes every /v2/ request require these
// credentials; others get 401 with a Basic challenge.
func WithRegistryBasicAuth(user, password string) RegistryOption {
	return func(c *registryConfig) { c.user, c.password = user, password }
}

// NewRegistry starts a registry, stopped when the test ends.
func NewRegistry(t TB, opts ...RegistryOption) *Registry {
	t.Helper()
	r := &Registry{lookups: map[string]int{}, listings: map[string]int{}, tamper: map[string]bool{}}
	for _, o := range opts {
		o(&r.cfg)
	}
	h := registry.New(
		registry.WithReferrersSupport(r.cfg.referrers),
		registry.Logger(log.New(io.Discard, "", 0)),
	)
	r.srv = httptest.NewServer(r.handler(h))
	t.Cleanup(r.srv.Close)
	return r
}

// Host is "127.0.0.1:PORT".
func (r *Registry) Host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// Requests counts every HTTP request the registry received.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// TagLookups counts HEAD and GET /v2/REPO/manifests/TAG; repo is the path
// without the host.
func (r *Registry) TagLookups(repo, tag string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[repo+":"+tag]
}

// TagListings counts GET /v2/REPO/tags/list.
func (r *Registry) TagListings(repo string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listings[repo]
}

// TamperBlob makes the next GET of that blob ("sha256:…") return different
// bytes of the same length, as a compromised registry or proxy would.
func (r *Registry) TamperBlob(digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tamper[digest] = true
}

func (r *Registry) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if r.cfg.user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != r.cfg.user || p != r.cfg.password {
				w.Header().Set("WWW-Authenticate", `Basic realm="testenv registry"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
		}
		if r.count(req) {
			r.serveTampered(w, req, next)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// count records the request and reports whether it is a GET of a blob to
// tamper with (consuming the tamper mark).
func (r *Registry) count(req *http.Request) bool {
	p := strings.TrimPrefix(req.URL.Path, "/v2/")
	r.mu.Lock()
	defer r.mu.Unlock()
	if repo, ref, ok := cutLast(p, "/manifests/"); ok && !strings.HasPrefix(ref, "sha256:") && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		r.lookups[repo+":"+ref]++
	}
	if repo, ok := strings.CutSuffix(p, "/tags/list"); ok && req.Method == http.MethodGet {
		r.listings[repo]++
	}
	if _, dgst, ok := cutLast(p, "/blobs/"); ok && req.Method == http.MethodGet && r.tamper[dgst] {
		delete(r.tamper, dgst)
		return true
	}
	return false
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

// serveTampered serves the real response with every byte flipped: same
// length and headers, different content.
func (r *Registry) serveTampered(w http.ResponseWriter, req *http.Request, next http.Handler) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, req)
	body := bytes.Clone(rec.Body.Bytes())
	for i := range body {
		body[i] ^= 0xff
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}
