package plan

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// -update rewrites the golden files from what Render prints now; read the
// diff before committing it.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var made = time.Date(2026, 12, 1, 9, 57, 0, 0, time.UTC)

func urn(typ, name string) string { return "urn:pulumi:dev::bridge::" + typ + "::" + name }

// fourOps is a plan with one resource of each kind of change.
func fourOps() *Document {
	return &Document{
		APIVersion: APIVersion, ID: "plan-5f1c2a9e", Namespace: "infra", Name: "web", StackName: "dev",
		Revision: "main@sha1:0123456789abcdef", InputsDigest: "sha256:aa", CreatedAt: made,
		Mode:    v1alpha1.ApprovalManual,
		Changes: v1alpha1.ChangeSummary{Create: 1, Update: 1, Replace: 1, Delete: 1},
		Same:    3,
		Resources: []v1alpha1.PlannedResource{
			{URN: urn("kubernetes:core/v1:ConfigMap", "settings"), Type: "kubernetes:core/v1:ConfigMap", Op: "update", Properties: []string{"data.color", `metadata.annotations["x/y"]`}},
			{URN: urn("kubernetes:core/v1:Secret", "token"), Type: "kubernetes:core/v1:Secret", Op: "create"},
			{URN: urn("kubernetes:apps/v1:Deployment", "api"), Type: "kubernetes:apps/v1:Deployment", Op: "replace", Properties: []string{"spec.selector"}},
			{URN: urn("kubernetes:core/v1:Service", "old"), Type: "kubernetes:core/v1:Service", Op: "delete"},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	one := fourOps()
	one.Changes, one.Same = v1alpha1.ChangeSummary{Update: 1}, 0
	one.Resources = one.Resources[:1]
	// A child of a component: its type comes from the URN when the record
	// has none, after the parent's "$".
	child := fourOps()
	child.Changes, child.Same = v1alpha1.ChangeSummary{Create: 1}, 1
	child.Resources = []v1alpha1.PlannedResource{{URN: "urn:pulumi:dev::bridge::my:app:Web$kubernetes:core/v1:ConfigMap::web-cm", Op: "create"}}
	// A first apply: the stack's root resource is created too, and the
	// engine's default provider is no row (Pulumi shows none).
	firstApply := fourOps()
	firstApply.Changes, firstApply.Same = v1alpha1.ChangeSummary{Create: 2}, 0
	firstApply.Resources = []v1alpha1.PlannedResource{
		{URN: "urn:pulumi:dev::bridge::pulumi:pulumi:Stack::bridge-dev", Type: "pulumi:pulumi:Stack", Op: "create"},
		{URN: "urn:pulumi:dev::bridge::pulumi:providers:kubernetes::default_4_18_0", Type: "pulumi:providers:kubernetes", Op: "create"},
		{URN: urn("kubernetes:core/v1:ConfigMap", "settings"), Type: "kubernetes:core/v1:ConfigMap", Op: "create"},
	}
	for _, tc := range []struct {
		golden string
		doc    *Document
		opts   RenderOptions
	}{
		{"four-ops", fourOps(), RenderOptions{Now: made.Add(3 * time.Minute)}},
		{"four-ops-colour", fourOps(), RenderOptions{Colour: true}},
		{"one-update", one, RenderOptions{}},
		{"component-child", child, RenderOptions{}},
		{"omitted", fourOps(), RenderOptions{Omitted: 57}},
		{"first-apply", firstApply, RenderOptions{}},
	} {
		var b bytes.Buffer
		if err := Render(&b, tc.doc, tc.opts); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", tc.golden+".golden")
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to write it)", err)
		}
		if b.String() != string(want) {
			t.Errorf("%s: got:\n%s\nwant:\n%s", tc.golden, b.String(), want)
		}
	}
}

// TestRenderNoColourCodes: without Colour, no escape sequence at all (a
// pipe or a file gets plain text).
func TestRenderNoColourCodes(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, fourOps(), RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("escape codes without Colour:\n%q", b.String())
	}
	b.Reset()
	if err := Render(&b, fourOps(), RenderOptions{Colour: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\x1b[32m +   ├─ kubernetes:core/v1:Secret") {
		t.Errorf("create is not green:\n%q", b.String())
	}
}

func TestSymbol(t *testing.T) {
	for op, want := range map[string]string{"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": "", "": ""} {
		if got := Symbol(op); got != want {
			t.Errorf("Symbol(%q) = %q, want %q", op, got, want)
		}
	}
}

func TestSummaryCounts(t *testing.T) {
	for _, tc := range []struct {
		changes v1alpha1.ChangeSummary
		same    int64
		want    string
	}{
		{v1alpha1.ChangeSummary{Create: 2}, 0, "Resources:\n    + 2 to create\n    2 changes\n"},
		{v1alpha1.ChangeSummary{Delete: 1}, 4, "Resources:\n    - 1 to delete\n    1 change. 4 unchanged\n"},
		{v1alpha1.ChangeSummary{}, 5, "Resources:\n    5 unchanged\n"},
	} {
		var b bytes.Buffer
		p := &printer{w: &b}
		p.summary(&Document{Changes: tc.changes, Same: tc.same})
		if b.String() != tc.want {
			t.Errorf("%+v same %d: got %q, want %q", tc.changes, tc.same, b.String(), tc.want)
		}
	}
}

func TestFromPendingPlan(t *testing.T) {
	s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}}
	if d, _ := FromPendingPlan(s); d != nil {
		t.Fatalf("a Document without a pending plan: %+v", d)
	}
	s.Spec.StackName = "dev"
	s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalPreviewOnly}
	full := fourOps()
	s.Status.PendingPlan = &v1alpha1.PendingPlan{
		ID: full.ID, Revision: full.Revision, InputsDigest: full.InputsDigest, CreatedAt: metav1.NewTime(made),
		Changes: full.Changes, Total: 60, Resources: full.Resources,
	}
	d, omitted := FromPendingPlan(s)
	if omitted != 56 {
		t.Errorf("omitted = %d, want 56", omitted)
	}
	if d.ID != full.ID || d.StackName != "dev" || d.Mode != v1alpha1.ApprovalPreviewOnly || d.Namespace != "infra" || len(d.Resources) != 4 || d.Changes != full.Changes {
		t.Errorf("got %+v", d)
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "just now", 42 * time.Second: "42s ago", 3 * time.Minute: "3m ago",
		90 * time.Minute: "1h30m ago", 50 * time.Hour: "50h ago",
	} {
		if got := ago(d); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
}
