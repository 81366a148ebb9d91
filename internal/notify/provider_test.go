package notify

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func sampleEvent(t v1alpha1.AlertEventType) Event {
	return Event{Type: t, Namespace: "infra", Name: "network", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567",
		Severity: SeverityError, Reason: v1alpha1.ProgramErrorReason, Message: "boom",
		Changes:   &v1alpha1.ChangeSummary{Create: 2, Update: 1},
		Resources: []string{"urn:pulumi:dev::p::kubernetes:core/v1:ConfigMap::settings"},
		Time:      time.Unix(0, 0), GitURL: "https://github.com/acme/infra.git"}
}

func decode(t *testing.T, r *Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	return m
}

func TestSlackPayload(t *testing.T) {
	r, err := Build(Target{Type: v1alpha1.ProviderSlack, Address: "https://hooks.example/x", Channel: "#ops"}, sampleEvent(v1alpha1.EventFailed))
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, r)
	if m["channel"] != "#ops" || !strings.Contains(m["text"].(string), "Stack infra/network failed at main@sha1:") ||
		!strings.Contains(m["text"].(string), "2 created, 1 updated") || !strings.Contains(m["text"].(string), ": boom") {
		t.Errorf("payload %s", r.Body)
	}
	if blocks, _ := m["blocks"].([]any); len(blocks) != 2 || !strings.Contains(string(r.Body), "ConfigMap::settings") {
		t.Errorf("blocks: %s", r.Body)
	}
	if r.URL != "https://hooks.example/x" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %v", r.URL, r.Header)
	}
}

func TestTeamsPayload(t *testing.T) {
	r, err := Build(Target{Type: v1alpha1.ProviderMSTeams, Address: "https://teams.example/x"}, sampleEvent(v1alpha1.EventApplied))
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, r)
	if m["@type"] != "MessageCard" || m["@context"] != "https://schema.org/extensions" || m["summary"] == "" {
		t.Errorf("payload %s", r.Body)
	}
	if !strings.Contains(string(r.Body), `"name":"Revision"`) || !strings.Contains(string(r.Body), `"value":"2 created, 1 updated"`) {
		t.Errorf("facts: %s", r.Body)
	}
}

func TestPagerDutyPayload(t *testing.T) {
	target := Target{Type: v1alpha1.ProviderPagerDuty, Address: v1alpha1.DefaultPagerDutyAddress, Token: "rk"}
	trig, err := Build(target, sampleEvent(v1alpha1.EventFailed))
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, trig)
	if m["routing_key"] != "rk" || m["event_action"] != "trigger" || m["dedup_key"] != "stackpilot/infra/network" {
		t.Errorf("trigger %s", trig.Body)
	}
	p := m["payload"].(map[string]any)
	for _, k := range []string{"summary", "source", "severity", "custom_details"} {
		if p[k] == nil || p[k] == "" {
			t.Errorf("payload.%s missing: %s", k, trig.Body)
		}
	}
	if p["severity"] != "error" {
		t.Errorf("severity %v", p["severity"])
	}
	res, err := Build(target, sampleEvent(v1alpha1.EventRecovered))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Body); got != `{"dedup_key":"stackpilot/infra/network","event_action":"resolve","routing_key":"rk"}` {
		t.Errorf("resolve %s", got)
	}
	d, _ := Build(target, sampleEvent(v1alpha1.EventDrifted))
	dr, _ := Build(target, sampleEvent(v1alpha1.EventDriftResolved))
	if decode(t, d)["dedup_key"] != "stackpilot/infra/network/drift" || decode(t, dr)["event_action"] != "resolve" || decode(t, dr)["dedup_key"] != "stackpilot/infra/network/drift" {
		t.Errorf("drift %s / %s", d.Body, dr.Body)
	}
	if _, err := Build(target, sampleEvent(v1alpha1.EventApplied)); !errors.Is(err, ErrSkip) {
		t.Errorf("an apply is no incident: %v", err)
	}
}

func TestGitHubStatus(t *testing.T) {
	target := Target{Type: v1alpha1.ProviderGitHub, Address: "https://api.github.com/", Token: "ght"}
	for typ, state := range map[v1alpha1.AlertEventType]string{
		v1alpha1.EventApplied: "success", v1alpha1.EventRecovered: "success", v1alpha1.EventFailed: "failure",
		v1alpha1.EventRolledBack: "failure", v1alpha1.EventPlanPending: "pending",
	} {
		r, err := Build(target, sampleEvent(typ))
		if err != nil {
			t.Fatal(err)
		}
		if r.URL != "https://api.github.com/repos/acme/infra/statuses/0123456789abcdef0123456789abcdef01234567" || r.Header.Get("Authorization") != "Bearer ght" {
			t.Errorf("%s: %s %v", typ, r.URL, r.Header)
		}
		m := decode(t, r)
		if m["state"] != state || m["context"] != "stackpilot/infra/network" || len(m["description"].(string)) > 140 {
			t.Errorf("%s: %s", typ, r.Body)
		}
	}
	if _, err := Build(target, sampleEvent(v1alpha1.EventDrifted)); !errors.Is(err, ErrSkip) {
		t.Errorf("drift: %v", err)
	}
	ev := sampleEvent(v1alpha1.EventApplied)
	ev.Revision = "1.2.3@sha256:abcd"
	if _, err := Build(target, ev); !errors.Is(err, ErrSkip) {
		t.Errorf("OCI revision: %v", err)
	}
}

func TestOwnerRepo(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/acme/infra.git":   "acme/infra",
		"https://github.com/acme/infra":       "acme/infra",
		"ssh://git@github.com/acme/infra.git": "acme/infra",
		"git@github.com:acme/infra.git":       "acme/infra",
		"http://127.0.0.1:9/x/acme/infra.git": "acme/infra",
		"https://host/infra.git":              "",
	} {
		o, r, ok := OwnerRepo(in)
		got := ""
		if ok {
			got = o + "/" + r
		}
		if got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func TestGenericAndHMAC(t *testing.T) {
	ev := sampleEvent(v1alpha1.EventFailed)
	r, err := Build(Target{Type: v1alpha1.ProviderGeneric, Address: "http://x/"}, ev)
	if err != nil {
		t.Fatal(err)
	}
	var back Event
	if err := json.Unmarshal(r.Body, &back); err != nil || back.Type != ev.Type || back.Message != "boom" || back.Changes.Create != 2 {
		t.Errorf("%v %s", err, r.Body)
	}
	if strings.Contains(string(r.Body), "github.com") {
		t.Errorf("internal fields are not sent: %s", r.Body)
	}
	h, err := Build(Target{Type: v1alpha1.ProviderGenericHMAC, Address: "http://x/", Token: "key"}, ev)
	if err != nil {
		t.Fatal(err)
	}
	// echo -n body | openssl dgst -sha256 -hmac key, computed independently:
	if sig := h.Header.Get("X-Signature"); !strings.HasPrefix(sig, "sha256=") || sig != Sign("key", h.Body) || len(sig) != len("sha256=")+64 {
		t.Errorf("signature %q", sig)
	}
	if Sign("key", []byte("hello")) != "sha256=9307b3b915efb5171ff14d8cb55fbcc798c6c0ef1456d66ded1a6aa723a58b7b" {
		t.Errorf("Sign: %s", Sign("key", []byte("hello")))
	}
}

func TestScrubber(t *testing.T) {
	s := NewScrubber([]string{"hunter22", "ab", "-----BEGIN KEY-----\nline-of-key-material\n-----END KEY-----"})
	ev := sampleEvent(v1alpha1.EventFailed)
	ev.Message = "auth hunter22 failed near line-of-key-material (ab)"
	ev.Resources = []string{"urn::hunter22"}
	got := s.Event(ev)
	if strings.Contains(got.Message, "hunter22") || strings.Contains(got.Message, "line-of-key-material") || strings.Contains(got.Resources[0], "hunter22") {
		t.Errorf("%+v", got)
	}
	if !strings.Contains(got.Message, "(ab)") {
		t.Errorf("short values are left: %q", got.Message)
	}
	if ev.Resources[0] != "urn::hunter22" {
		t.Errorf("the original event is not changed")
	}
}
