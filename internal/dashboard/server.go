// Package dashboard is the web dashboard the controller serves on its own
// HTTPS listener (--dashboard-bind-address): the fleet of Stacks, filtered,
// sorted and paged on the server, to each caller as their own Kubernetes
// identity lets them see it. The pages are plain HTML, CSS and a little
// JavaScript embedded in the binary (assets/): nothing is loaded from
// anywhere else, and no front-end toolchain builds them.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/server"
)

//go:embed assets
var assets embed.FS

// Server answers the dashboard's pages and API.
type Server struct {
	// Reader lists Stacks, Receivers and Alerts: the manager's cache (this
	// shard's objects).
	Reader client.Reader
	// APIReader reads what an action decides on as the API server has it
	// now; Writer patches Stacks for the actions, as the controller, once
	// Access found the caller allowed to patch them.
	APIReader client.Reader
	Writer    client.Client
	Access    *Access
	// Hub tells the pages' event streams of changes.
	Hub *Hub
	// Logs and Plans serve the engine logs and the plans (nil: none kept).
	Logs  *server.LogsHandler
	Plans *server.PlanHandler

	sessions sessions
	codes    codes
}

// NewServer returns the dashboard over reader, deciding access with cl and
// acting with it.
func NewServer(reader, apiReader client.Reader, cl client.Client) *Server {
	return &Server{Reader: reader, APIReader: apiReader, Writer: cl, Access: &Access{Client: cl}, Hub: &Hub{}}
}

// Handler serves:
//
//	GET    /                 the pages (and their assets under /assets/)
//	POST   /api/signin-codes sign-in code for the bearer token in Authorization -> {"code"} (one use, one minute)
//	POST   /api/session      sign in: {"token": "..."} or {"code": "..."} -> a session cookie and {"user", "csrf"}
//	GET    /api/session      who is signed in: {"user", "csrf"}
//	DELETE /api/session      sign out
//	GET    /api/fleet        the fleet: ?namespace=&selector=&state=&name=&sort=&page=&pageSize=
//	GET    /api/stacks/{namespace}/{name}          one Stack (StackView)
//	GET    /api/stacks/{namespace}/{name}/logs     an operation's engine log (text; ?operation=&follow=1)
//	GET    /api/stacks/{namespace}/{name}/plan[/{id}]  a plan's document (the pending plan without id)
//	POST   /api/stacks/{namespace}/{name}/{action} approve ({"plan": id}), reconcile, suspend, resume, check-drift
//	GET    /api/graph        dependsOn and stackOutputs edges (?namespace=)
//	GET    /api/blast-radius the changes waiting to land and the Stacks each touches (?namespace=)
//	GET    /api/receivers    the Receivers (?namespace=)
//	GET    /api/alerts       the Alerts (?namespace=)
//	GET    /api/events       server-sent events: a change of an object the caller may get
//
// Every API answer but the log and the events is JSON; an error is
// {"error": "..."} with 400, 401, 403, 404, 405 or 409.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServer(http.FS(static))
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", files))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page, _ := assets.ReadFile("assets/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("POST /api/session", s.signIn)
	mux.HandleFunc("POST /api/signin-codes", s.withIdentity(s.signInCode))
	mux.HandleFunc("GET /api/session", s.withIdentity(s.whoami))
	mux.HandleFunc("DELETE /api/session", s.withIdentity(s.signOut))
	mux.HandleFunc("GET /api/fleet", s.withIdentity(s.fleet))
	mux.HandleFunc("GET /api/stacks/{namespace}/{name}", s.withIdentity(s.stack))
	mux.HandleFunc("GET /api/stacks/{namespace}/{name}/logs", s.withIdentity(s.logs))
	mux.HandleFunc("GET /api/stacks/{namespace}/{name}/plan", s.withIdentity(s.plan))
	mux.HandleFunc("GET /api/stacks/{namespace}/{name}/plan/{id}", s.withIdentity(s.plan))
	mux.HandleFunc("POST /api/stacks/{namespace}/{name}/{action}", s.withIdentity(s.act))
	mux.HandleFunc("GET /api/graph", s.withIdentity(s.graph))
	mux.HandleFunc("GET /api/blast-radius", s.withIdentity(s.blast))
	mux.HandleFunc("GET /api/receivers", s.withIdentity(s.receivers))
	mux.HandleFunc("GET /api/alerts", s.withIdentity(s.alerts))
	mux.HandleFunc("GET /api/events", s.withIdentity(s.events))
	return secureHeaders(mux)
}

// secureHeaders: nothing of the page may come from elsewhere, be framed or
// be sniffed, and API answers are not cached.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if strings.HasPrefix(r.URL.Path, "/api/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// caller is who a request comes from, and its session when it came with
// the cookie.
type caller struct {
	id      *Identity
	session *session
}

// withIdentity authenticates the request: a bearer token in Authorization
// (API clients), else the session cookie, whose state-changing requests
// must carry the session's CSRF token and come from this origin.
func (s *Server) withIdentity(next func(w http.ResponseWriter, r *http.Request, c caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var c caller
		token, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !bearer {
			cookie, err := r.Cookie(sessionCookie)
			if err != nil {
				writeError(w, http.StatusUnauthorized, "not signed in: run `stackpilot dashboard`, which signs you in with your kubeconfig's token")
				return
			}
			c.session = s.sessions.get(cookie.Value)
			if c.session == nil {
				writeError(w, http.StatusUnauthorized, "the session ended (8 hours, or the controller restarted): sign in again with `stackpilot dashboard`")
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				if !c.session.csrfOK(r.Header.Get(csrfHeader)) || !sameOrigin(r) {
					writeError(w, http.StatusForbidden, "refused: a change must come from the dashboard's own page (CSRF token and origin)")
					return
				}
			}
			token = c.session.token
		}
		id, err := s.Access.Authenticate(r.Context(), strings.TrimSpace(token))
		if err != nil {
			writeAuthError(w, err)
			return
		}
		c.id = id
		next(w, r, c)
	}
}

// sameOrigin: a browser's Origin (sent on every POST, PUT, DELETE), when
// present, names this host.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	return origin == "https://"+r.Host
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		// A form of another site cannot send JSON without asking first.
		writeError(w, http.StatusUnsupportedMediaType, `send {"token": "..."} as application/json`)
		return
	}
	var in struct {
		Token string `json:"token"`
		Code  string `json:"code"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&in); err != nil || (strings.TrimSpace(in.Token) == "" && in.Code == "") {
		writeError(w, http.StatusBadRequest, `send {"token": "..."} (a Kubernetes bearer token) or {"code": "..."} (from stackpilot dashboard)`)
		return
	}
	token := strings.TrimSpace(in.Token)
	if in.Code != "" {
		if token = s.codes.redeem(in.Code); token == "" {
			writeError(w, http.StatusUnauthorized, "the sign-in code is unknown, used or older than a minute: run `stackpilot dashboard` again")
			return
		}
	}
	id, err := s.Access.Authenticate(r.Context(), token)
	if err != nil {
		writeAuthError(w, err)
		return
	}
	x := s.sessions.start(token)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: x.id, Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, Expires: x.expires})
	writeJSON(w, map[string]string{"user": id.User, "csrf": x.csrf})
}

// signInCode gives a bearer-token caller a code that signs a browser in
// as them, once. Only a request that came with the token itself may ask:
// a session cannot make codes for itself.
func (s *Server) signInCode(w http.ResponseWriter, r *http.Request, c caller) {
	if c.session != nil {
		writeError(w, http.StatusForbidden, "a sign-in code is made for a bearer token in Authorization, not for a session")
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	writeJSON(w, map[string]string{"code": s.codes.issue(strings.TrimSpace(token)), "user": c.id.User})
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, c caller) {
	out := map[string]string{"user": c.id.User}
	if c.session != nil {
		out["csrf"] = c.session.csrf
	}
	writeJSON(w, out)
}

func (s *Server) signOut(w http.ResponseWriter, _ *http.Request, c caller) {
	if c.session != nil {
		s.sessions.end(c.session.id)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

// fleetTimeout bounds a listing, reviews included.
const fleetTimeout = 30 * time.Second

func (s *Server) fleet(w http.ResponseWriter, r *http.Request, c caller) {
	q, err := fleetQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fleetTimeout)
	defer cancel()
	var list v1alpha1.StackList
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if q.Namespace != "" {
		opts = append(opts, client.InNamespace(q.Namespace))
	}
	if err := s.Reader.List(ctx, &list, opts...); err != nil {
		writeError(w, http.StatusInternalServerError, "list the Stacks: "+err.Error())
		return
	}
	all := make([]*v1alpha1.Stack, len(list.Items))
	for i := range list.Items {
		all[i] = &list.Items[i]
	}
	seen, partial, err := visible(ctx, s.Access, c.id, resourceStacks, all)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	f := page(seen, q)
	writeJSON(w, struct {
		Fleet
		User    string `json:"user"`
		Partial bool   `json:"partial,omitempty"`
	}{f, c.id.User, partial})
}

// fleetQuery reads the fleet's query parameters; a bad one is an error
// that says which and what it takes.
func fleetQuery(r *http.Request) (Query, error) {
	v := r.URL.Query()
	q := Query{Namespace: v.Get("namespace"), Name: v.Get("name"), Sort: v.Get("sort"), State: State(v.Get("state"))}
	if sel := v.Get("selector"); sel != "" {
		parsed, err := labels.Parse(sel)
		if err != nil {
			return q, errors.New("selector: " + err.Error())
		}
		q.Selector = parsed
	}
	if q.State != "" && !containsState(q.State) {
		return q, errors.New("state: one of Ready, Failing, Drifted, PlanPending, Suspended, Running")
	}
	switch strings.TrimPrefix(q.Sort, "-") {
	case "", "name", "namespace", "state", "updated":
	default:
		return q, errors.New("sort: name, namespace, state or updated, with - first to reverse")
	}
	for _, p := range []struct {
		name string
		to   *int
	}{{"page", &q.Page}, {"pageSize", &q.PageSize}} {
		if raw := v.Get(p.name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 {
				return q, errors.New(p.name + ": a positive number")
			}
			*p.to = n
		}
	}
	if q.PageSize > MaxPageSize {
		return q, errors.New("pageSize: at most " + strconv.Itoa(MaxPageSize))
	}
	return q, nil
}

func containsState(s State) bool {
	for _, x := range States {
		if x == s {
			return true
		}
	}
	return false
}

// writeAuthError answers a failed token review: 401 when the API server
// refused the token, 500 when it could not be asked.
func writeAuthError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, errUnauthenticated) {
		code = http.StatusUnauthorized
	}
	writeError(w, code, err.Error())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
