package controller

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

func storedPlan(t *testing.T, s *PlanStore, uid types.UID, id string) *plan.Document {
	t.Helper()
	file, err := s.Stage(uid, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"pulumi":"plan"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := &plan.Document{APIVersion: plan.APIVersion, ID: id, Namespace: "ns", Name: "web",
		Resources: []v1alpha1.PlannedResource{{URN: "urn:a", Op: "update", Properties: []string{"data.color"}}}}
	if err := s.Commit(uid, doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestPlanStore(t *testing.T) {
	g := NewWithT(t)
	s, err := NewPlanStore(filepath.Join(t.TempDir(), "plans"))
	g.Expect(err).NotTo(HaveOccurred())
	storedPlan(t, s, "uid-1", "plan-1")
	g.Expect(s.Has("uid-1", "plan-1")).To(BeTrue())
	g.Expect(s.PlanFile("uid-1", "plan-1")).To(BeAnExistingFile())
	doc, err := s.Document("uid-1", "plan-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(doc.Resources).To(HaveLen(1))

	// A preview that saved no plan makes none; its staging dir is gone.
	_, err = s.Stage("uid-1", "plan-2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Commit("uid-1", &plan.Document{ID: "plan-2"})).To(MatchError(ContainSubstring("saved no update plan")))
	g.Expect(s.Has("uid-1", "plan-2")).To(BeFalse())
	left, _ := filepath.Glob(filepath.Join(s.dir, "uid-1", stagingPrefix+"*"))
	g.Expect(left).To(BeEmpty())

	// Ids that could name a path outside the store name no plan.
	for _, id := range []string{"../uid-1/plan-1", "..", "", "a/b"} {
		_, err := s.Document("uid-1", id)
		g.Expect(err).To(MatchError(errPlanNotFound), id)
		_, err = s.Stage("uid-1", id)
		g.Expect(err).To(HaveOccurred(), id)
	}

	g.Expect(s.Remove("uid-1", "plan-1")).To(Succeed())
	_, err = s.Document("uid-1", "plan-1")
	g.Expect(err).To(MatchError(errPlanNotFound))
	storedPlan(t, s, "uid-1", "plan-3")
	g.Expect(s.RemoveStack("uid-1")).To(Succeed())
	g.Expect(filepath.Join(s.dir, "uid-1")).NotTo(BeADirectory())
}

func TestPlanHandler(t *testing.T) {
	g := NewWithT(t)
	s, err := NewPlanStore(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"},
		Status: v1alpha1.StackStatus{PendingPlan: &v1alpha1.PendingPlan{ID: "plan-1"}}}
	other := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "idle", UID: "uid-2"}}
	h := &PlanHandler{Store: s, Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack, other).Build()}
	storedPlan(t, s, "uid-1", "plan-1")
	storedPlan(t, s, "uid-1", "plan-0")

	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		g.Expect(json.Unmarshal(rec.Body.Bytes(), &body)).To(Succeed(), rec.Body.String())
		g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
		return rec.Code, body
	}
	code, body := get("/plans/ns/web")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body["id"]).To(Equal("plan-1"))
	code, body = get("/plans/ns/web/plan-0")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body["id"]).To(Equal("plan-0"))
	for path, want := range map[string]string{
		"/plans/ns/web/plan-9": "no plan",
		"/plans/ns/idle":       "no pending plan",
		"/plans/ns/gone":       "no Stack",
		"/plans/ns":            "use /plans/",
		"/plans/ns/web/a/b":    "use /plans/",
	} {
		code, body := get(path)
		g.Expect(code).To(Equal(http.StatusNotFound), path)
		g.Expect(body["error"]).To(ContainSubstring(want), path)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/plans/ns/web", strings.NewReader("")))
	g.Expect(rec.Code).To(Equal(http.StatusMethodNotAllowed))
}

func TestAnnotationWriter(t *testing.T) {
	g := NewWithT(t)
	at := func(s int) *metav1.Time { return &metav1.Time{Time: metav1.Now().Add(-secs(s))} }
	entry := func(manager string, t *metav1.Time, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: t, FieldsV1: metav1.NewFieldsV1(raw)}
	}
	approve := `{"f:metadata":{"f:annotations":{".":{},"f:stackpilot.dev/approve":{}}}}`
	other := `{"f:metadata":{"f:annotations":{"f:other":{}}}}`
	g.Expect(annotationWriter(nil, v1alpha1.ApproveAnnotation)).To(Equal("unknown"))
	g.Expect(annotationWriter([]metav1.ManagedFieldsEntry{
		entry("kubectl-annotate", at(60), approve),
		entry("alice-apply", at(5), approve),
		entry("stackpilot-controller", at(1), other),
	}, v1alpha1.ApproveAnnotation)).To(Equal("alice-apply"), "the newest writer of that annotation")
}

func secs(s int) time.Duration { return time.Duration(s) * time.Second }
