package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// stackIn is a Stack with the given conditions (type=status pairs).
func stackIn(ns, name string, conds ...string) *v1alpha1.Stack {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": ns}}}
	for _, c := range conds {
		typ, status, _ := strings.Cut(c, "=")
		s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: "R",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 1, 0, 0, len(name), 0, time.UTC))})
	}
	return s
}

// fakeCluster answers TokenReviews (token "alice-token" is alice, "admin-
// token" admin) and SubjectAccessReviews (alice may get the Stacks of
// team-a whole, and team-b's "shared" by name, and patch team-a's; admin
// may get everything), counting
// the reviews.
func fakeCluster(t *testing.T, objs ...client.Object) (client.Client, *int) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	reviews := 0
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch o := obj.(type) {
			case *authnv1.TokenReview:
				reviews++
				switch o.Spec.Token {
				case "alice-token":
					o.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice"}}
				case "admin-token":
					o.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "admin"}}
				}
				return nil
			case *authzv1.SubjectAccessReview:
				reviews++
				a := o.Spec.ResourceAttributes
				o.Status.Allowed = (a.Verb == "get" && (o.Spec.User == "admin" ||
					(o.Spec.User == "alice" && (a.Namespace == "team-a" || (a.Namespace == "team-b" && a.Name == "shared"))))) ||
					(a.Verb == "patch" && o.Spec.User == "alice" && a.Namespace == "team-a")
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	return cl, &reviews
}

func do(t *testing.T, h http.Handler, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "https://dash.example"+path, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func fleetOf(t *testing.T, rec *httptest.ResponseRecorder) Fleet {
	t.Helper()
	if rec.Code != 200 {
		t.Fatalf("fleet: %d %s", rec.Code, rec.Body)
	}
	var f Fleet
	if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func names(f Fleet) []string {
	var out []string
	for _, r := range f.Rows {
		out = append(out, r.Namespace+"/"+r.Name)
	}
	return out
}

// TestFleetSeesWhatTheCallerMayGet: alice sees team-a's Stacks and the one
// of team-b she may get by name; admin sees all; a bad token is 401.
func TestFleetSeesWhatTheCallerMayGet(t *testing.T) {
	cl, _ := fakeCluster(t,
		stackIn("team-a", "net", "Ready=True"), stackIn("team-a", "db", "Ready=False"),
		stackIn("team-b", "shared", "Ready=True"), stackIn("team-b", "secret-plans", "Ready=True"),
		stackIn("team-c", "other", "Ready=True"))
	h := NewServer(cl, cl, cl).Handler()
	alice := fleetOf(t, do(t, h, "GET", "/api/fleet", "", "Authorization", "Bearer alice-token"))
	if got := fmt.Sprint(names(alice)); got != "[team-a/db team-a/net team-b/shared]" {
		t.Fatalf("alice sees %s", got)
	}
	if alice.Counts[StateReady] != 2 || alice.Counts[StateFailing] != 1 {
		t.Fatalf("alice's counts %v", alice.Counts)
	}
	admin := fleetOf(t, do(t, h, "GET", "/api/fleet?pageSize=2&page=2&sort=namespace", "", "Authorization", "Bearer admin-token"))
	if admin.Total != 5 || fmt.Sprint(names(admin)) != "[team-b/secret-plans team-b/shared]" {
		t.Fatalf("admin page 2: total %d, %v", admin.Total, names(admin))
	}
	if rec := do(t, h, "GET", "/api/fleet", "", "Authorization", "Bearer nobody"); rec.Code != 401 {
		t.Fatalf("a bad token: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "GET", "/api/fleet", ""); rec.Code != 401 {
		t.Fatalf("no token: %d", rec.Code)
	}
	for _, bad := range []string{"state=Happy", "sort=age", "page=0", "pageSize=501", "selector=a%3D%3D%3Db"} {
		if rec := do(t, h, "GET", "/api/fleet?"+bad, "", "Authorization", "Bearer admin-token"); rec.Code != 400 {
			t.Errorf("%s: %d %s", bad, rec.Code, rec.Body)
		}
	}
}

// TestSessionAndCSRF: signing in sets an HttpOnly, Secure, SameSite=Strict
// cookie and answers a CSRF token; with the cookie, a change without that
// token, or from another origin, is refused.
func TestSessionAndCSRF(t *testing.T) {
	cl, _ := fakeCluster(t, stackIn("team-a", "net", "Ready=True"))
	h := NewServer(cl, cl, cl).Handler()
	if rec := do(t, h, "POST", "/api/session", `{"token":"alice-token"}`); rec.Code != 415 {
		t.Fatalf("a sign-in that is no JSON: %d", rec.Code)
	}
	if rec := do(t, h, "POST", "/api/session", `{"token":"wrong"}`, "Content-Type", "application/json"); rec.Code != 401 {
		t.Fatalf("a wrong token: %d", rec.Code)
	}
	rec := do(t, h, "POST", "/api/session", `{"token":"alice-token"}`, "Content-Type", "application/json")
	if rec.Code != 200 {
		t.Fatalf("sign in: %d %s", rec.Code, rec.Body)
	}
	var who struct{ User, CSRF string }
	_ = json.Unmarshal(rec.Body.Bytes(), &who)
	cookie := rec.Result().Cookies()[0]
	if who.User != "alice" || who.CSRF == "" || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("who %+v, cookie %+v", who, cookie)
	}
	if strings.Contains(rec.Body.String(), "alice-token") || strings.Contains(cookie.Value, "alice-token") {
		t.Fatal("the token went back to the browser")
	}
	withCookie := []string{"Cookie", sessionCookie + "=" + cookie.Value}
	if f := fleetOf(t, do(t, h, "GET", "/api/fleet", "", withCookie...)); f.Total != 1 {
		t.Fatalf("the cookie's fleet: %+v", f)
	}
	if rec := do(t, h, "DELETE", "/api/session", "", withCookie...); rec.Code != 403 {
		t.Fatalf("a change without the CSRF token: %d", rec.Code)
	}
	if rec := do(t, h, "DELETE", "/api/session", "", append(withCookie, csrfHeader, who.CSRF, "Origin", "https://evil.example")...); rec.Code != 403 {
		t.Fatalf("a change from another origin: %d", rec.Code)
	}
	if rec := do(t, h, "DELETE", "/api/session", "", append(withCookie, csrfHeader, who.CSRF, "Origin", "https://dash.example")...); rec.Code != 204 {
		t.Fatalf("sign out: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "GET", "/api/fleet", "", withCookie...); rec.Code != 401 {
		t.Fatalf("after sign-out: %d", rec.Code)
	}
}

// TestPageAndHeaders: the page and its assets are served from the binary,
// under a policy that lets nothing in from elsewhere.
func TestPageAndHeaders(t *testing.T) {
	cl, _ := fakeCluster(t)
	h := NewServer(cl, cl, cl).Handler()
	rec := do(t, h, "GET", "/", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `<script src="/assets/core.js"`) {
		t.Fatalf("/: %d %s", rec.Code, rec.Body)
	}
	// Every script and style the page names is served.
	var named []string
	for _, m := range regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(rec.Body.String(), -1) {
		named = append(named, m[1])
	}
	if len(named) < 6 {
		t.Fatalf("the page names %v", named)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP %q", csp)
	}
	for _, a := range named {
		if rec := do(t, h, "GET", a, ""); rec.Code != 200 || rec.Body.Len() < 100 {
			t.Fatalf("%s: %d", a, rec.Code)
		}
	}
	if rec := do(t, h, "GET", "/assets/nope.js", ""); rec.Code != 404 {
		t.Fatalf("a missing asset: %d", rec.Code)
	}
}

// TestReviewsAreRemembered: a second listing within the TTL reviews
// nothing again.
func TestReviewsAreRemembered(t *testing.T) {
	var objs []client.Object
	for i := range 50 {
		objs = append(objs, stackIn("team-a", fmt.Sprintf("s%02d", i), "Ready=True"))
	}
	cl, reviews := fakeCluster(t, objs...)
	h := NewServer(cl, cl, cl).Handler()
	fleetOf(t, do(t, h, "GET", "/api/fleet", "", "Authorization", "Bearer alice-token"))
	first := *reviews
	if first > 3 {
		t.Fatalf("%d reviews for 50 Stacks of one namespace: want the token, all namespaces, team-a", first)
	}
	fleetOf(t, do(t, h, "GET", "/api/fleet", "", "Authorization", "Bearer alice-token"))
	if *reviews != first {
		t.Fatalf("%d reviews more on the second listing", *reviews-first)
	}
}

// TestSignInCodes: a bearer-token caller gets a code that opens one
// session, once; a session cannot make codes.
func TestSignInCodes(t *testing.T) {
	cl, _ := fakeCluster(t, stackIn("team-a", "net", "Ready=True"))
	h := NewServer(cl, cl, cl).Handler()
	rec := do(t, h, "POST", "/api/signin-codes", "", "Authorization", "Bearer alice-token")
	var got struct{ Code string }
	_ = json.Unmarshal(rec.Body.Bytes(), &got)
	if rec.Code != 200 || got.Code == "" || strings.Contains(rec.Body.String(), "alice-token") {
		t.Fatalf("code: %d %s", rec.Code, rec.Body)
	}
	body := `{"code":"` + got.Code + `"}`
	rec = do(t, h, "POST", "/api/session", body, "Content-Type", "application/json")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"user":"alice"`) {
		t.Fatalf("sign in with the code: %d %s", rec.Code, rec.Body)
	}
	if again := do(t, h, "POST", "/api/session", body, "Content-Type", "application/json"); again.Code != 401 {
		t.Fatalf("the code used twice: %d", again.Code)
	}
	cookie := rec.Result().Cookies()[0]
	var who struct{ CSRF string }
	_ = json.Unmarshal(rec.Body.Bytes(), &who)
	if r := do(t, h, "POST", "/api/signin-codes", "", "Cookie", sessionCookie+"="+cookie.Value, csrfHeader, who.CSRF); r.Code != 403 {
		t.Fatalf("a session made a code: %d", r.Code)
	}
	if r := do(t, h, "POST", "/api/signin-codes", ""); r.Code != 401 {
		t.Fatalf("no token: %d", r.Code)
	}
}

func TestCodeExpires(t *testing.T) {
	now := time.Now()
	c := codes{now: func() time.Time { return now }}
	k := c.issue("tok")
	now = now.Add(codeTTL + time.Second)
	if got := c.redeem(k); got != "" {
		t.Fatalf("an expired code redeemed: %q", got)
	}
}

// TestStackView: a Stack is served to who may get it, 403 to others
// (before it is read), with its commit linked and its outputs as status
// masks them; a credential in the source URL is never shown.
func TestStackView(t *testing.T) {
	s := stackIn("team-a", "net", "Ready=True")
	s.Spec.Source.Git = &v1alpha1.GitSource{URL: "https://user:p4ss@github.com/acme/infra.git"}
	s.Status.LastAppliedRevision = "main@sha1:" + strings.Repeat("ab", 20)
	s.Status.Outputs = map[string]string{"endpoint": `"db.example"`, "password": v1alpha1.SecretOutputValue}
	started := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	finished := metav1.NewTime(started.Add(90 * time.Second))
	s.Status.History = []v1alpha1.OperationRecord{{ID: "up-1", Type: v1alpha1.OperationUp, StartedAt: started, FinishedAt: &finished, Outcome: v1alpha1.OutcomeSucceeded}}
	other := stackIn("team-c", "other", "Ready=True")
	cl, _ := fakeCluster(t, s, other)
	h := NewServer(cl, cl, cl).Handler()
	rec := do(t, h, "GET", "/api/stacks/team-a/net", "", "Authorization", "Bearer alice-token")
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var v StackView
	_ = json.Unmarshal(rec.Body.Bytes(), &v)
	if v.CommitURL != "https://github.com/acme/infra/commit/"+strings.Repeat("ab", 20) || v.Source != "https://github.com/acme/infra.git" ||
		v.History[0].Seconds != 90 || v.Outputs["password"] != v1alpha1.SecretOutputValue {
		t.Fatalf("view: %+v", v)
	}
	if strings.Contains(rec.Body.String(), "p4ss") {
		t.Fatal("the source's credential reached the page")
	}
	if rec := do(t, h, "GET", "/api/stacks/team-c/other", "", "Authorization", "Bearer alice-token"); rec.Code != 403 {
		t.Fatalf("another namespace's Stack: %d", rec.Code)
	}
	if rec := do(t, h, "GET", "/api/stacks/team-a/missing", "", "Authorization", "Bearer alice-token"); rec.Code != 404 {
		t.Fatalf("a missing Stack: %d", rec.Code)
	}
}

func TestCommitURL(t *testing.T) {
	sha := strings.Repeat("c", 40)
	for _, tc := range []struct{ repo, want string }{
		{"git@github.com:acme/infra.git", "https://github.com/acme/infra/commit/" + sha},
		{"https://gitlab.com/group/sub/infra", "https://gitlab.com/group/sub/infra/-/commit/" + sha},
		{"ssh://git@bitbucket.org:22/acme/infra.git", "https://bitbucket.org/acme/infra/commits/" + sha},
		{"https://git.example/acme/infra", ""},
	} {
		if got := commitURL(tc.repo, "main@sha1:"+sha); got != tc.want {
			t.Errorf("commitURL(%q) = %q", tc.repo, got)
		}
	}
}
