package wire

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
)

func TestURLsAndPaths(t *testing.T) {
	api, _ := url.Parse("https://api.example.com:6443/prefix")
	base := ProxyURL(api, "stackpilot-system", "stackpilot-controller")
	if got, want := base.String(), "https://api.example.com:6443/prefix/api/v1/namespaces/stackpilot-system/services/https:stackpilot-controller:logs/proxy"; got != want {
		t.Errorf("ProxyURL = %s, want %s", got, want)
	}
	for _, tc := range []struct{ got, want string }{
		{LogsURL(base, "infra", "web", "", false).String(), base.String() + "/logs/infra/web"},
		{LogsURL(base, "infra", "web", "up-1", true).String(), base.String() + "/logs/infra/web?follow=1&operation=up-1"},
		{PlanURL(base, "infra", "web", "").String(), base.String() + "/plans/infra/web"},
		{PlanURL(base, "infra", "web", "plan-1").String(), base.String() + "/plans/infra/web/plan-1"},
		{PolicyInputURL(base, "infra", "web", "").String(), base.String() + "/plans/infra/web?content=policy-input"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}

	// What a client builds, the server splits back.
	for _, tc := range []struct {
		prefix, path string
		want         []string
	}{
		{LogsPath, LogsURL(&url.URL{Path: "/"}, "infra", "web", "", false).Path, []string{"infra", "web"}},
		{PlansPath, PlanURL(&url.URL{Path: "/"}, "infra", "web", "plan-1").Path, []string{"infra", "web", "plan-1"}},
		{LogsPath, "/logs/infra/web/", []string{"infra", "web"}},
		{LogsPath, "/logs/", []string{""}},
		{LogsPath, "/plans/infra/web", nil},
	} {
		if got := SplitPath(tc.prefix, tc.path); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitPath(%q, %q) = %q, want %q", tc.prefix, tc.path, got, tc.want)
		}
	}

	for q, want := range map[string]bool{"follow=1": true, "follow=true": true, "follow=0": false, "": false} {
		v, _ := url.ParseQuery(q)
		if Follows(v) != want {
			t.Errorf("Follows(%q) = %v", q, !want)
		}
	}
}

func TestErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, http.StatusForbidden, `bob may not get "web"`)
	if rec.Code != http.StatusForbidden || rec.Header().Get("Content-Type") != ContentJSON {
		t.Errorf("WriteError: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if msg, ok := ReadError(rec.Body.Bytes()); !ok || msg != `bob may not get "web"` {
		t.Errorf("ReadError(%s) = %q, %v", rec.Body.String(), msg, ok)
	}
	// Not the controller's: the API server's Status, text, an empty error.
	for _, body := range []string{`{"kind":"Status","status":"Failure"}`, "no endpoints available\n", `{"error": ""}`, ""} {
		if msg, ok := ReadError([]byte(body)); ok {
			t.Errorf("ReadError(%q) = %q, true", body, msg)
		}
	}
}
