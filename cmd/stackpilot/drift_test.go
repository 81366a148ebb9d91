package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

var driftNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func mt(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// driftedStack is a Stack whose last check found two resources drifted.
func driftedStack() *v1alpha1.Stack {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}}
	s.Spec.DriftDetection = &v1alpha1.DriftDetection{Mode: v1alpha1.DriftRemediate, Interval: &metav1.Duration{Duration: 30 * time.Minute}}
	s.Status.LastAppliedRevision = "main@sha1:abc"
	s.Status.Drift = &v1alpha1.DriftStatus{
		CheckedAt:   mt(driftNow.Add(-3 * time.Minute)),
		NextCheckAt: mt(driftNow.Add(57 * time.Minute)),
		Revision:    "main@sha1:abc",
		Total:       2,
		Resources: []v1alpha1.DriftedResource{
			{URN: "urn:pulumi:dev::app::kubernetes:core/v1:ConfigMap::settings", Type: "kubernetes:core/v1:ConfigMap", Name: "settings", Op: "update", Properties: []string{"data.color", `metadata.annotations["x/y"]`}},
			{URN: "urn:pulumi:dev::app::kubernetes:core/v1:Secret::token", Type: "kubernetes:core/v1:Secret", Op: "delete"},
		},
	}
	s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.DriftedCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.DriftDetectedReason,
		Message: "2 resource(s) drifted: settings (data.color, ...), token (deleted)"}}
	return s
}

func TestDriftShowTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeDriftReport(&b, "table", newDriftReport(driftedStack()), driftNow); err != nil {
		t.Fatal(err)
	}
	want := `Stack:       infra/web (mode Remediate, every 30m0s)
Drifted:     True (DriftDetected): 2 resource(s) drifted: settings (data.color, ...), token (deleted)
Checked at:  2026-12-01T09:57:00Z (3m ago)
Revision:    main@sha1:abc
Next check:  2026-12-01T10:57:00Z (in 57m)
Total:       2 drifted resource(s)

NAME       TYPE                           OP       PROPERTIES
settings   kubernetes:core/v1:ConfigMap   update   data.color, metadata.annotations["x/y"]
token      kubernetes:core/v1:Secret      delete   -
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestDriftShowMoreThanListed(t *testing.T) {
	s := driftedStack()
	s.Status.Drift.Total = 57
	var b bytes.Buffer
	if err := writeDriftReport(&b, "table", newDriftReport(s), driftNow); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b.String(), "... and 55 more (status lists the first 50)\n") {
		t.Errorf("no line for the resources status leaves out:\n%s", b.String())
	}
}

func TestDriftShowNoCheckYet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.Stack)
		want   []string
	}{
		{"never applied", func(s *v1alpha1.Stack) { s.Status = v1alpha1.StackStatus{} },
			[]string{"Drift:       no drift check yet (nothing applied yet: checks start after the first apply)\n"}},
		{"scheduled", func(s *v1alpha1.Stack) {
			s.Status.Drift = &v1alpha1.DriftStatus{NextCheckAt: mt(driftNow.Add(90 * time.Second))}
			s.Status.Conditions = nil
		}, []string{"Drift:       no drift check yet\n", "Next check:  2026-12-01T10:01:30Z (in 2m)\n"}},
		{"disabled", func(s *v1alpha1.Stack) {
			s.Spec.DriftDetection.Mode = v1alpha1.DriftDisabled
			s.Status.Drift, s.Status.Conditions = nil, nil
		}, []string{"no drift check yet (mode Disabled: run `stackpilot drift check web -n infra` for one now)"}},
		{"first check failed", func(s *v1alpha1.Stack) {
			s.Status.Drift = nil
			s.Status.Conditions[0] = metav1.Condition{Type: v1alpha1.DriftedCondition, Status: metav1.ConditionUnknown,
				Reason: v1alpha1.DriftCheckFailedReason, Message: "refresh: backend locked"}
		}, []string{"no drift check yet", "Drifted:     Unknown (DriftCheckFailed): refresh: backend locked\n"}},
	} {
		s := driftedStack()
		tc.mutate(s)
		var b bytes.Buffer
		if err := writeDriftReport(&b, "table", newDriftReport(s), driftNow); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, b.String())
			}
		}
		if strings.Contains(b.String(), "NAME") {
			t.Errorf("%s: a resource table without a check:\n%s", tc.name, b.String())
		}
	}
}

func TestDriftShowStructured(t *testing.T) {
	var b bytes.Buffer
	if err := writeDriftReport(&b, "json", newDriftReport(driftedStack()), driftNow); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b.String())
	}
	for k, v := range map[string]any{"namespace": "infra", "name": "web", "mode": "Remediate", "total": 2.0,
		"checkedAt": "2026-12-01T09:57:00Z", "revision": "main@sha1:abc", "applied": true} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if res := got["resources"].([]any); len(res) != 2 || res[0].(map[string]any)["properties"].([]any)[1] != `metadata.annotations["x/y"]` {
		t.Errorf("resources = %v", got["resources"])
	}
	if cond := got["condition"].(map[string]any); cond["status"] != "True" || cond["reason"] != "DriftDetected" {
		t.Errorf("condition = %v", cond)
	}

	// Without a check, resources is an empty list, not null: jq '.resources | length' works.
	b.Reset()
	if err := writeDriftReport(&b, "yaml", newDriftReport(&v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b"}}), driftNow); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "resources: []\n") || !strings.Contains(b.String(), "mode: Detect\n") || !strings.Contains(b.String(), "interval: 1h0m0s\n") {
		t.Errorf("yaml:\n%s", b.String())
	}
}

func TestDriftCheckRan(t *testing.T) {
	before := mt(driftNow.Add(-time.Hour))
	for _, tc := range []struct {
		name    string
		mutate  func(*v1alpha1.Stack)
		before  *metav1.Time
		errWith string
	}{
		{"new check", func(*v1alpha1.Stack) {}, before, ""},
		{"first check", func(*v1alpha1.Stack) {}, nil, ""},
		{"same check as before", func(s *v1alpha1.Stack) { s.Status.Drift.CheckedAt = before }, before,
			"no drift check finished (status.drift.checkedAt did not change)"},
		{"nothing applied", func(s *v1alpha1.Stack) { s.Status = v1alpha1.StackStatus{} }, nil,
			"no drift check ran: Stack infra/web has applied nothing yet"},
		{"failed", func(s *v1alpha1.Stack) {
			s.Status.Conditions[0].Status, s.Status.Conditions[0].Reason, s.Status.Conditions[0].Message = metav1.ConditionUnknown, v1alpha1.DriftCheckFailedReason, "refresh: exit 255"
		}, before, "the drift check of Stack infra/web failed (DriftCheckFailed): refresh: exit 255"},
		{"not ready", func(s *v1alpha1.Stack) {
			s.Status.Drift.CheckedAt = before
			s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "ProgramError", Message: "up failed"})
		}, before, "Ready is False (ProgramError): up failed"},
		{"an up went first", func(s *v1alpha1.Stack) {
			s.Status.Drift.CheckedAt = before
			s.Status.History = []v1alpha1.OperationRecord{{ID: "up-1", Type: v1alpha1.OperationUp}}
		}, before, "the controller ran up up-1 first (a change to apply goes before a check); run the check again"},
	} {
		s := driftedStack()
		tc.mutate(s)
		err := checkRan(s, newDriftReport(s), tc.before)
		switch {
		case tc.errWith == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.errWith != "" && (err == nil || !strings.Contains(err.Error(), tc.errWith)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.errWith)
		}
	}
}

func TestDriftRequestValue(t *testing.T) {
	v := driftRequestValue(time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600)))
	if v != "drift-2026-12-01T09:00:00.123456789Z" {
		t.Errorf("got %q", v)
	}
}

func TestRoughDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond: "2s", 59 * time.Second: "59s", 90 * time.Second: "2m",
		57 * time.Minute: "57m", 65 * time.Minute: "1h5m", 26 * time.Hour: "26h0m",
	} {
		if got := roughDuration(d); got != want {
			t.Errorf("roughDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"web", "web", 0}, {"web", "wbe", 2}, {"web", "webs", 1}, {"", "abc", 3}, {"api", "web", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

// TestDriftFlags checks the command line before anything talks to a
// cluster: the kubeconfig points at a server that does not exist.
func TestDriftFlags(t *testing.T) {
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
		{[]string{"drift"}, 2, "stackpilot: drift needs a command: check, show"},
		{[]string{"drift", "chek"}, 2, "did you mean check?"},
		{[]string{"drift", "show"}, 2, "drift show takes one Stack name, got 0 argument(s)"},
		{[]string{"drift", "check", "a", "b"}, 2, "drift check takes one Stack name, got 2 argument(s)"},
		{[]string{"drift", "show", "web", "-o", "xml"}, 2, `-o "xml": want table, json or yaml`},
		{[]string{"drift", "check", "web", "-o", "wide"}, 2, `-o "wide": want table, json or yaml`},
		{[]string{"drift", "check", "web", "--timeout", "0s"}, 2, "--timeout 0s: want a positive duration"},
		{[]string{"drift", "check", "web", "--timeout", "soon"}, 2, `invalid argument "soon" for "--timeout"`},
		{[]string{"drift", "check", "web", "--wait=maybe"}, 2, `invalid argument "maybe" for "--wait"`},
		{[]string{"drift", "show", "web", "--context", "nope"}, 1, `kubeconfig (context "nope")`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.errs) {
			t.Errorf("stackpilot %q: exit %d, stderr %q; want exit %d with %q", tc.args, code, stderr, tc.code, tc.errs)
		}
	}
}

func TestDriftHelp(t *testing.T) {
	code, stdout, _ := runCLI(t, "drift", "check", "--help")
	if code != 0 || !strings.Contains(stdout, "3  the check ran and found drift") || !strings.Contains(stdout, "--timeout duration") || !strings.Contains(stdout, "(default 5m0s)") {
		t.Errorf("exit %d, help:\n%s", code, stdout)
	}
	if _, stdout, _ := runCLI(t, "--help"); !strings.Contains(stdout, "drift ") {
		t.Errorf("the root help lists no drift:\n%s", stdout)
	}
}

// TestDriftReportDrifted is what decides exit 3: Drifted=True only.
func TestDriftReportDrifted(t *testing.T) {
	for status, want := range map[metav1.ConditionStatus]bool{metav1.ConditionTrue: true, metav1.ConditionFalse: false, metav1.ConditionUnknown: false} {
		s := driftedStack()
		s.Status.Conditions[0].Status = status
		if got := newDriftReport(s).drifted(); got != want {
			t.Errorf("Drifted=%s: drifted() = %v, want %v", status, got, want)
		}
	}
	if newDriftReport(&v1alpha1.Stack{}).drifted() {
		t.Error("no condition: drifted() = true")
	}
}
