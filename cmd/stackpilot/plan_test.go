package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

var planMade = time.Date(2026, 12, 1, 9, 57, 0, 0, time.UTC)

// pendingStack is a Manual Stack with plan p1 pending at revision main@sha1:new.
func pendingStack() *v1alpha1.Stack {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}}
	s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
	s.Status.LastAppliedRevision = "main@sha1:old"
	s.Status.PendingPlan = &v1alpha1.PendingPlan{
		ID: "p1", Revision: "main@sha1:new", InputsDigest: "sha256:i", CreatedAt: metav1.NewTime(planMade),
		Changes: v1alpha1.ChangeSummary{Create: 1, Update: 2}, Total: 3,
	}
	return s
}

func TestApprovable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*v1alpha1.Stack)
		want    string
		code    int // exitError code, 0 for a plain error
		errWith string
	}{
		{"pending, no --plan", func(*v1alpha1.Stack) {}, "", 0, ""},
		{"pending, --plan matches", func(*v1alpha1.Stack) {}, "p1", 0, ""},
		{"stale --plan", func(*v1alpha1.Stack) {}, "p0", 0,
			"plan p0 is not the pending plan (p1 is, made at revision main@sha1:new at 2026-12-01T09:57:00Z): run `stackpilot plan web -n infra` to review it, then approve it with --plan p1"},
		{"no pending plan", func(s *v1alpha1.Stack) { s.Status.PendingPlan = nil }, "", exitNoPlan,
			"Stack infra/web has no pending plan: it is up to date at revision main@sha1:old"},
		{"PreviewOnly", func(s *v1alpha1.Stack) { s.Spec.Approval.Mode = v1alpha1.ApprovalPreviewOnly }, "p1", 0,
			"is PreviewOnly: its plan p1 is shown, never applied"},
		{"Auto", func(s *v1alpha1.Stack) { s.Spec.Approval = nil }, "p1", 0, "its approval mode is Auto"},
	} {
		s := pendingStack()
		tc.mutate(s)
		id, err := approvable(s, tc.want)
		if tc.errWith == "" {
			if err != nil || id != "p1" {
				t.Errorf("%s: got %q, %v; want p1", tc.name, id, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errWith) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.errWith)
			continue
		}
		var ee *exitError
		if got := errors.As(err, &ee); got != (tc.code != 0) || (got && ee.code != tc.code) {
			t.Errorf("%s: error %#v, want exit code %d", tc.name, err, tc.code)
		}
	}
}

func TestNoPendingPlanWhy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.Stack)
		want   string
	}{
		{"up to date", func(*v1alpha1.Stack) {}, ": it is up to date at revision main@sha1:old"},
		{"not ready", func(s *v1alpha1.Stack) {
			s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "ProgramError", Message: "boom"}}
		}, "up to date at revision main@sha1:old, but Ready is False (ProgramError): boom"},
		{"previewing", func(s *v1alpha1.Stack) {
			s.Status.CurrentOperation = &v1alpha1.OperationRecord{ID: "pv-1", Type: v1alpha1.OperationPreview, Revision: "main@sha1:new"}
		}, "the controller is making one (preview pv-1 at revision main@sha1:new); run this again when it ends"},
		{"nothing yet", func(s *v1alpha1.Stack) { s.Status.LastAppliedRevision = "" }, "nothing is applied yet and no plan is made yet; see `kubectl describe stack web -n infra`"},
		{"auto", func(s *v1alpha1.Stack) { s.Spec.Approval = nil }, "its approval mode is Auto"},
	} {
		s := pendingStack()
		s.Status.PendingPlan = nil
		tc.mutate(s)
		err := noPendingPlan(s)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitNoPlan || !strings.Contains(ee.msg, tc.want) || !strings.HasPrefix(ee.msg, "Stack infra/web has no pending plan") {
			t.Errorf("%s: %#v, want exit 3 with %q", tc.name, err, tc.want)
		}
	}
}

func TestUpOfPlan(t *testing.T) {
	done := metav1.NewTime(planMade)
	s := pendingStack()
	s.Status.History = []v1alpha1.OperationRecord{
		{ID: "up-2", Type: v1alpha1.OperationUp, Plan: "p1", Outcome: v1alpha1.OutcomeRunning},
		{ID: "pv-1", Type: v1alpha1.OperationPreview, Plan: "p1", Outcome: v1alpha1.OutcomeSucceeded, FinishedAt: &done},
		{ID: "up-1", Type: v1alpha1.OperationUp, Plan: "p0", Outcome: v1alpha1.OutcomeSucceeded, FinishedAt: &done},
	}
	if r := upOfPlan(s, "p1"); r != nil {
		t.Errorf("the preview that made the plan, or a running up, counts as its apply: %+v", r)
	}
	s.Status.History[0].Outcome, s.Status.History[0].FinishedAt = v1alpha1.OutcomeFailed, &done
	if r := upOfPlan(s, "p1"); r == nil || r.ID != "up-2" {
		t.Errorf("got %+v, want up-2", r)
	}
}

func TestPlanHint(t *testing.T) {
	s := pendingStack()
	if got := planHint(s, "p1"); got != "To apply exactly this plan: stackpilot approve web -n infra --plan p1" {
		t.Errorf("Manual: %q", got)
	}
	s.Annotations = map[string]string{v1alpha1.ApproveAnnotation: "p1"}
	if got := planHint(s, "p1"); !strings.Contains(got, "is approved") {
		t.Errorf("approved: %q", got)
	}
	s.Spec.Approval.Mode = v1alpha1.ApprovalPreviewOnly
	if got := planHint(s, "p1"); !strings.Contains(got, "never applied") {
		t.Errorf("PreviewOnly: %q", got)
	}
}

func TestChangesLine(t *testing.T) {
	if got := changesLine(v1alpha1.ChangeSummary{Create: 1, Replace: 2, Delete: 3}); got != "1 to create, 3 to delete, 2 to replace" {
		t.Errorf("got %q", got)
	}
	if got := changesLine(v1alpha1.ChangeSummary{}); got != "no changes" {
		t.Errorf("got %q", got)
	}
}

// TestPlanFetch reads Documents from a server answering as the controller
// (and, proxied, as the API server on the way to it) would.
func TestPlanFetch(t *testing.T) {
	doc := plan.Document{APIVersion: plan.APIVersion, ID: "p1", Namespace: "infra", Name: "web", Revision: "main@sha1:new"}
	var status int
	var body string
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	encoded := func(d plan.Document) string { b, _ := json.Marshal(d); return string(b) }
	wrongID := doc
	wrongID.ID = "p0"
	oldAPI := doc
	oldAPI.APIVersion = "plan.stackpilot.dev/v0"
	for _, tc := range []struct {
		name    string
		proxied bool
		status  int
		body    string
		errWith string
		notFoun bool
	}{
		{"ok", false, 200, encoded(doc), "", false},
		{"controller 404", false, 404, `{"error": "no plan p1 for infra/web"}`, "has no such plan: no plan p1 for infra/web", true},
		{"controller 404 proxied", true, 404, `{"error": "no plan p1 for infra/web"}`, "has no such plan", true},
		{"no service", true, 404, `{"kind":"Status","status":"Failure","reason":"NotFound"}`, "is Stackpilot installed there?", false},
		{"forbidden", true, 403, `{"kind":"Status"}`, "ask for get on services/proxy there, or pass --controller-url", false},
		{"no endpoints", true, 503, "no endpoints available for service \"stackpilot-controller\"\n", "did not answer (is the controller running, with --logs-bind-address?): no endpoints available", false},
		{"no get on the Stack", true, 403, `{"error": "bob may not get stacks.stackpilot.dev \"web\""}`, "not allowed to read the plans of Stack infra/web: bob may not get", false},
		{"token refused", false, 401, `{"error": "no bearer token"}`, "the controller did not accept your token: no bearer token; pass a valid one with --token", false},
		{"server error", false, 500, "boom\nmore", "answered 500 Internal Server Error: boom", false},
		{"other plan", false, 200, encoded(wrongID), "answered plan p0 of infra/web, not plan p1 of infra/web", false},
		{"other version", false, 200, encoded(oldAPI), `a plan of apiVersion "plan.stackpilot.dev/v0"`, false},
		{"not JSON", false, 200, "<html>", "answered something that is not a plan", false},
	} {
		status, body = tc.status, tc.body
		base, _ := url.Parse(srv.URL + "/prefix")
		e := &endpoint{base: base, client: srv.Client(), via: "X", proxied: tc.proxied}
		d, err := e.fetchPlan(context.Background(), "infra", "web", "p1")
		if gotPath != "/prefix/plans/infra/web/p1" {
			t.Errorf("%s: GET %s", tc.name, gotPath)
		}
		if tc.errWith == "" {
			if err != nil || d.ID != "p1" || d.Revision != "main@sha1:new" {
				t.Errorf("%s: %+v, %v", tc.name, d, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errWith) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.errWith)
		}
		var nf *planNotFoundError
		if errors.As(err, &nf) != tc.notFoun {
			t.Errorf("%s: planNotFoundError = %v, want %v", tc.name, !tc.notFoun, tc.notFoun)
		}
	}

	// Nobody listening: the message names where it went, once.
	srv.Close()
	base, _ := url.Parse(srv.URL)
	_, err := (&endpoint{base: base, client: http.DefaultClient, via: "the controller at " + srv.URL}).fetchPlan(context.Background(), "infra", "web", "p1")
	if err == nil || !strings.HasPrefix(err.Error(), "reaching the controller at "+srv.URL+": ") || strings.Contains(err.Error(), "Get ") {
		t.Errorf("closed server: %v", err)
	}
}

// TestPlanFlags checks the command lines refused before anything talks to
// a cluster: the kubeconfig points at a server that does not exist.
func TestPlanFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	for _, tc := range []struct {
		args []string
		code int
		errs string
	}{
		{[]string{"plan"}, 2, "stackpilot: plan takes one Stack name, got 0 argument(s)"},
		{[]string{"plan", "web", "-o", "table"}, 2, `-o "table": want text, json or yaml`},
		{[]string{"plan", "web", "--controller-url", "localhost:8080"}, 2, `--controller-url "localhost:8080": want https://host:port`},
		{[]string{"plan", "web", "--controller-namespace", ""}, 2, "--controller-namespace must not be empty"},
		{[]string{"approve", "a", "b"}, 2, "approve takes one Stack name, got 2 argument(s)"},
		{[]string{"approve", "web", "--plan", ""}, 2, "--plan needs a plan id (see `stackpilot plan web`)"},
		{[]string{"approve", "web", "--wait", "--timeout", "0s"}, 2, "--timeout 0s: want a positive duration"},
		{[]string{"approve", "web", "--context", "nope"}, 1, `kubeconfig (context "nope")`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.errs) {
			t.Errorf("stackpilot %q: exit %d, stderr %q; want exit %d with %q", tc.args, code, stderr, tc.code, tc.errs)
		}
	}
	code, stdout, _ := runCLI(t, "approve", "--help")
	if code != 0 || !strings.Contains(stdout, "3  the Stack has no pending plan") || !strings.Contains(stdout, "--plan string") {
		t.Errorf("approve --help: exit %d\n%s", code, stdout)
	}
	if _, stdout, _ := runCLI(t, "--help"); !strings.Contains(stdout, "plan ") || !strings.Contains(stdout, "approve ") {
		t.Errorf("the root help lists no plan/approve:\n%s", stdout)
	}
}
