// Package forgetest is a recording forge for tests: one HTTP server that
// speaks the parts of the GitHub, GitLab and Gitea REST APIs that previews
// use, as their documentation defines them (paths, methods, JSON bodies,
// each forge's authorization header, pagination), keeps pull requests'
// files, comments and commit statuses in memory, refuses what a forge
// would refuse (a wrong token, an unknown state, a description too long),
// and records every request.
package forgetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Forge names, and the path prefix each is served under.
const (
	GitHub    = "github"
	GitLab    = "gitlab"
	Gitea     = "gitea"
	Bitbucket = "bitbucket"
)

var prefixes = map[string]string{GitHub: "/github", GitLab: "/gitlab/api/v4", Gitea: "/gitea/api/v1", Bitbucket: "/bitbucket/2.0"}

// Request is one request the server received.
type Request struct {
	Forge, Method, Path string
	Query               url.Values
	Body                string
	// Auth is the authorization header the forge reads (Authorization, or
	// GitLab's PRIVATE-TOKEN), as sent.
	Auth string
	// Code is what the server answered.
	Code int
}

// Comment is a comment on a pull request.
type Comment struct {
	ID   int64
	Body string
	// Edits counts the times it was edited.
	Edits int
}

// Status is a commit status as the forge keeps it.
type Status struct {
	State, Context, Description, TargetURL string
}

// Pull is an open pull request, as the forge lists it.
type Pull struct {
	Number    int64
	Head, Ref string
	Base      string
	Fork      bool
	Labels    []string
}

type repo struct {
	name     string
	files    map[int64][]string
	comments map[int64][]*Comment
	statuses map[string][]Status
	pulls    []Pull
}

// Server is the recording forge.
type Server struct {
	Token string
	srv   *httptest.Server

	mu       sync.Mutex
	requests []Request
	repos    map[string]*repo // forge + " " + owner/name
	nextID   int64
}

// New starts a recording forge that accepts token, stopped when t ends.
func New(t testing.TB, token string) *Server {
	s := &Server{Token: token, repos: map[string]*repo{}, nextID: 1000}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// APIURL is the base URL of forge's API on this server (spec.previews.apiURL).
func (s *Server) APIURL(forge string) string { return s.srv.URL + prefixes[forge] }

func (s *Server) repo(forge, name string) *repo {
	k := forge + " " + name
	r := s.repos[k]
	if r == nil {
		r = &repo{name: name, files: map[int64][]string{}, comments: map[int64][]*Comment{}, statuses: map[string][]Status{}}
		s.repos[k] = r
	}
	return r
}

// SetFiles says which files pull request number of forge's repository name
// changes.
func (s *Server) SetFiles(forge, name string, number int64, files ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repo(forge, name).files[number] = files
}

// SetPulls sets the open pull requests of a repository.
func (s *Server) SetPulls(forge, name string, pulls ...Pull) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repo(forge, name).pulls = pulls
}

// Comments are the comments of a pull request, oldest first (copies).
func (s *Server) Comments(forge, name string, number int64) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.repo(forge, name).comments[number] {
		out = append(out, *c)
	}
	return out
}

// Statuses are the statuses set on commit sha, oldest first.
func (s *Server) Statuses(forge, name, sha string) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.repo(forge, name).statuses[sha])
}

// Requests are the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Requests of one method and a path matching re.
func (s *Server) RequestsMatching(method, re string) []Request {
	rx := regexp.MustCompile(re)
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == method && rx.MatchString(r.Path) {
			out = append(out, r)
		}
	}
	return out
}

type route struct {
	method string
	re     *regexp.Regexp
	handle func(s *Server, w *answer, rp *repo, m []string, body []byte, q url.Values)
}

var (
	// {owner}/{repo} of GitHub and Gitea; GitLab's project id is the
	// escaped full path (one segment).
	ghRepo = `/repos/([^/]+/[^/]+)`
	glProj = `/projects/([^/]+)`
	bbRepo = `/repositories/([^/]+/[^/]+)`
	routes = map[string][]route{
		GitHub: {
			{"GET", regexp.MustCompile(`^` + ghRepo + `/pulls/(\d+)/files$`), listFiles},
			{"GET", regexp.MustCompile(`^` + ghRepo + `/issues/(\d+)/comments$`), listComments},
			{"POST", regexp.MustCompile(`^` + ghRepo + `/issues/(\d+)/comments$`), createComment},
			{"PATCH", regexp.MustCompile(`^` + ghRepo + `/issues/comments/(\d+)$`), editComment},
			{"POST", regexp.MustCompile(`^` + ghRepo + `/statuses/([0-9a-f]{40})$`), setStatus},
			{"GET", regexp.MustCompile(`^` + ghRepo + `/pulls$`), listPulls},
		},
		Bitbucket: {
			{"GET", regexp.MustCompile(`^` + bbRepo + `/pullrequests/(\d+)/diffstat$`), listFiles},
			{"GET", regexp.MustCompile(`^` + bbRepo + `/pullrequests/(\d+)/comments$`), listComments},
			{"POST", regexp.MustCompile(`^` + bbRepo + `/pullrequests/(\d+)/comments$`), createComment},
			{"PUT", regexp.MustCompile(`^` + bbRepo + `/pullrequests/(\d+)/comments/(\d+)$`), editComment},
			{"POST", regexp.MustCompile(`^` + bbRepo + `/commit/([0-9a-f]{40})/statuses/build$`), setStatus},
			{"GET", regexp.MustCompile(`^` + bbRepo + `/pullrequests$`), listPulls},
		},
		GitLab: {
			{"GET", regexp.MustCompile(`^` + glProj + `/merge_requests/(\d+)/diffs$`), listFiles},
			{"GET", regexp.MustCompile(`^` + glProj + `/merge_requests/(\d+)/notes$`), listComments},
			{"POST", regexp.MustCompile(`^` + glProj + `/merge_requests/(\d+)/notes$`), createComment},
			{"PUT", regexp.MustCompile(`^` + glProj + `/merge_requests/(\d+)/notes/(\d+)$`), editComment},
			{"POST", regexp.MustCompile(`^` + glProj + `/statuses/([0-9a-f]{40})$`), setStatus},
			{"GET", regexp.MustCompile(`^` + glProj + `/merge_requests$`), listPulls},
		},
	}
	// The states each forge admits.
	states = map[string][]string{
		GitHub:    {"error", "failure", "pending", "success"},
		Gitea:     {"pending", "success", "error", "failure", "warning"},
		GitLab:    {"pending", "running", "success", "failed", "canceled", "skipped"},
		Bitbucket: {"INPROGRESS", "SUCCESSFUL", "FAILED", "STOPPED"},
	}
)

// Gitea serves GitHub's paths.
func init() { routes[Gitea] = routes[GitHub] }

// answer writes a JSON answer and remembers its code.
type answer struct {
	http.ResponseWriter
	code  int
	forge string
}

func (a *answer) json(code int, v any) {
	a.code = code
	a.Header().Set("Content-Type", "application/json")
	a.WriteHeader(code)
	_ = json.NewEncoder(a).Encode(v)
}

func (a *answer) fail(code int, format string, args ...any) {
	a.json(code, map[string]string{"message": fmt.Sprintf(format, args...)})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var forge, path string
	for f, p := range prefixes {
		if rest, ok := strings.CutPrefix(r.URL.EscapedPath(), p+"/"); ok {
			forge, path = f, "/"+rest
		}
	}
	a := &answer{ResponseWriter: w, forge: forge}
	auth := r.Header.Get("Authorization")
	if forge == GitLab {
		auth = r.Header.Get("PRIVATE-TOKEN")
	}
	s.mu.Lock()
	defer func() {
		s.requests = append(s.requests, Request{Forge: forge, Method: r.Method, Path: path, Query: r.URL.Query(), Body: string(body), Auth: auth, Code: a.code})
		s.mu.Unlock()
	}()
	if forge == "" {
		a.fail(http.StatusNotFound, "Not Found")
		return
	}
	want := map[string]string{GitHub: "Bearer " + s.Token, Gitea: "token " + s.Token, GitLab: s.Token, Bitbucket: "Bearer " + s.Token}[forge]
	if auth != want {
		a.fail(http.StatusUnauthorized, "Bad credentials")
		return
	}
	if (r.Method == "POST" || r.Method == "PATCH" || r.Method == "PUT") && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		a.fail(http.StatusUnsupportedMediaType, "want a JSON body")
		return
	}
	for _, rt := range routes[forge] {
		m := rt.re.FindStringSubmatch(path)
		if m == nil || rt.method != r.Method {
			continue
		}
		name, err := url.PathUnescape(m[1])
		if err != nil {
			a.fail(http.StatusBadRequest, "bad repository")
			return
		}
		rt.handle(s, a, s.repo(forge, name), m, body, r.URL.Query())
		return
	}
	a.fail(http.StatusNotFound, "Not Found")
}

// page cuts items to the page the query asks for (per_page, or Gitea's
// limit; page from 1).
func page[T any](forge string, items []T, q url.Values) []T {
	sizeParam := map[string]string{Gitea: "limit", Bitbucket: "pagelen"}[forge]
	if sizeParam == "" {
		sizeParam = "per_page"
	}
	size, _ := strconv.Atoi(q.Get(sizeParam))
	if size <= 0 {
		size = 30
	}
	n, _ := strconv.Atoi(q.Get("page"))
	if n <= 0 {
		n = 1
	}
	from := min((n-1)*size, len(items))
	return items[from:min(from+size, len(items))]
}

func number(m []string) int64 { n, _ := strconv.ParseInt(m[2], 10, 64); return n }

func listFiles(s *Server, a *answer, rp *repo, m []string, _ []byte, q url.Values) {
	files, ok := rp.files[number(m)]
	if !ok {
		a.fail(http.StatusNotFound, "Not Found")
		return
	}
	var out []map[string]any
	for _, f := range files {
		switch a.forge {
		case GitLab:
			out = append(out, map[string]any{"old_path": f, "new_path": f})
		case Bitbucket:
			out = append(out, map[string]any{"status": "modified", "old": map[string]string{"path": f}, "new": map[string]string{"path": f}})
		default:
			out = append(out, map[string]any{"filename": f, "status": "modified"})
		}
	}
	list(a, out, q)
}

// list answers a listing: Bitbucket's is {"values", "next"}, the others'
// a bare array.
func list[T any](a *answer, all []T, q url.Values) {
	got := nonNil(page(a.forge, all, q))
	if a.forge != Bitbucket {
		a.json(http.StatusOK, got)
		return
	}
	body := map[string]any{"values": got}
	n, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("pagelen"))
	if max(n, 1)*max(size, 10) < len(all) {
		body["next"] = "https://api.bitbucket.org/2.0/next-page"
	}
	a.json(http.StatusOK, body)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func listComments(s *Server, a *answer, rp *repo, m []string, _ []byte, q url.Values) {
	var out []map[string]any
	for _, c := range rp.comments[number(m)] {
		out = append(out, commentJSON(a.forge, c))
	}
	list(a, out, q)
}

func commentJSON(forge string, c *Comment) map[string]any {
	if forge == Bitbucket {
		return map[string]any{"id": c.ID, "content": map[string]string{"raw": c.Body}}
	}
	return map[string]any{"id": c.ID, "body": c.Body}
}

// commentBody reads {"body"} (Bitbucket: {"content": {"raw"}}) and checks
// it as the forge would.
func commentBody(a *answer, body []byte) (string, bool) {
	var in struct {
		Body    string `json:"body"`
		Content struct {
			Raw string `json:"raw"`
		} `json:"content"`
	}
	err := json.Unmarshal(body, &in)
	text := in.Body
	if a.forge == Bitbucket {
		text = in.Content.Raw
	}
	if err != nil || strings.TrimSpace(text) == "" {
		a.fail(http.StatusBadRequest, "body is missing")
		return "", false
	}
	limit := map[string]int{GitHub: 65536, Bitbucket: 32768}[a.forge]
	if limit > 0 && len([]rune(text)) > limit {
		a.fail(http.StatusUnprocessableEntity, "Body is too long (maximum is %d characters)", limit)
		return "", false
	}
	return text, true
}

func createComment(s *Server, a *answer, rp *repo, m []string, body []byte, _ url.Values) {
	text, ok := commentBody(a, body)
	if !ok {
		return
	}
	s.nextID++
	c := &Comment{ID: s.nextID, Body: text}
	rp.comments[number(m)] = append(rp.comments[number(m)], c)
	a.json(http.StatusCreated, commentJSON(a.forge, c))
}

func editComment(s *Server, a *answer, rp *repo, m []string, body []byte, _ url.Values) {
	text, ok := commentBody(a, body)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(m[len(m)-1], 10, 64)
	for n, list := range rp.comments {
		if (a.forge == GitLab || a.forge == Bitbucket) && n != number(m) {
			continue
		}
		for _, c := range list {
			if c.ID == id {
				c.Body, c.Edits = text, c.Edits+1
				a.json(http.StatusOK, commentJSON(a.forge, c))
				return
			}
		}
	}
	a.fail(http.StatusNotFound, "Not Found")
}

func setStatus(s *Server, a *answer, rp *repo, m []string, body []byte, _ url.Values) {
	var in struct {
		State       string `json:"state"`
		Context     string `json:"context"`
		Name        string `json:"name"`
		Key         string `json:"key"`
		URL         string `json:"url"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		a.fail(http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if !slices.Contains(states[a.forge], in.State) {
		a.fail(http.StatusUnprocessableEntity, "state %q is not one of %v", in.State, states[a.forge])
		return
	}
	ctx := in.Context
	if a.forge == GitLab || a.forge == Bitbucket {
		ctx = in.Name
	}
	if a.forge == Bitbucket {
		if in.Key == "" || len(in.Key) > 40 || in.URL == "" {
			a.fail(http.StatusBadRequest, "key (at most 40 characters) and url are required")
			return
		}
		in.TargetURL = in.URL
	}
	if ctx == "" {
		a.fail(http.StatusUnprocessableEntity, "context is missing")
		return
	}
	if a.forge == GitHub && len([]rune(in.Description)) > 140 {
		a.fail(http.StatusUnprocessableEntity, "description is too long (maximum is 140 characters)")
		return
	}
	sha := m[2]
	rp.statuses[sha] = append(rp.statuses[sha], Status{State: in.State, Context: ctx, Description: in.Description, TargetURL: in.TargetURL})
	a.json(http.StatusCreated, map[string]any{"state": in.State, "context": ctx})
}

func listPulls(s *Server, a *answer, rp *repo, _ []string, _ []byte, q url.Values) {
	var out []map[string]any
	for _, p := range rp.pulls {
		if a.forge == Bitbucket {
			if q.Get("state") != "OPEN" {
				continue
			}
			src := rp.name
			if p.Fork {
				src = "fork-of/" + rp.name
			}
			out = append(out, map[string]any{"id": p.Number,
				"source":      map[string]any{"commit": map[string]string{"hash": p.Head[:12]}, "branch": map[string]string{"name": strings.TrimPrefix(p.Ref, "refs/heads/")}, "repository": map[string]string{"full_name": src}},
				"destination": map[string]any{"branch": map[string]string{"name": p.Base}, "repository": map[string]string{"full_name": rp.name}},
				"links":       map[string]any{"html": map[string]string{"href": fmt.Sprintf("https://bitbucket.org/%s/pull-requests/%d", rp.name, p.Number)}}})
			continue
		}
		if a.forge == GitLab {
			if b := q.Get("target_branch"); b != "" && b != p.Base {
				continue
			}
			src := int64(1)
			if p.Fork {
				src = 2
			}
			out = append(out, map[string]any{"iid": p.Number, "sha": p.Head, "target_branch": p.Base,
				"source_project_id": src, "target_project_id": 1, "labels": nonNil(p.Labels), "web_url": fmt.Sprintf("https://forge.test/mr/%d", p.Number)})
			continue
		}
		if b := q.Get("base"); b != "" && b != p.Base {
			continue
		}
		headRepo := rp.name
		if p.Fork {
			headRepo = "fork-of/" + rp.name
		}
		var labels []map[string]string
		for _, l := range p.Labels {
			labels = append(labels, map[string]string{"name": l})
		}
		out = append(out, map[string]any{"number": p.Number, "html_url": fmt.Sprintf("https://forge.test/pull/%d", p.Number),
			"head":   map[string]any{"sha": p.Head, "ref": p.Ref, "repo": map[string]string{"full_name": headRepo}},
			"base":   map[string]any{"ref": p.Base, "repo": map[string]string{"full_name": rp.name}},
			"labels": nonNil(labels)})
	}
	list(a, out, q)
}
