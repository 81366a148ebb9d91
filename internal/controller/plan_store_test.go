package controller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack, other).Build()
	h := &PlanHandler{Store: s, Reader: reader, Client: reviews(map[string]string{"alice-token": "alice", "bob-token": "bob"}, "alice")}
	storedPlan(t, s, "uid-1", "plan-1")
	storedPlan(t, s, "uid-1", "plan-0")

	getAs := func(token, path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		h.ServeHTTP(rec, req)
		var body map[string]any
		g.Expect(json.Unmarshal(rec.Body.Bytes(), &body)).To(Succeed(), rec.Body.String())
		g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/json"))
		return rec.Code, body
	}
	get := func(path string) (int, map[string]any) { return getAs("alice-token", path) }
	code, body := getAs("", "/plans/ns/web")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	g.Expect(body["error"]).To(ContainSubstring("no bearer token"))
	code, _ = getAs("forged", "/plans/ns/web")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, body = getAs("bob-token", "/plans/ns/web/plan-1")
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(body["error"]).To(Equal(`bob may not get stacks.stackpilot.dev "web" in namespace "ns", which reading its plans needs`))
	code, body = get("/plans/ns/web")
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

func writeFile(path string) error { return os.WriteFile(path, []byte(`{}`), 0o600) }

// reviews is a client whose TokenReviews know tokens (token -> user) and
// whose SubjectAccessReviews allow only allowed; what the API server does,
// for a handler test without one (the e2e tests use the real one).
func reviews(tokens map[string]string, allowed string) client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			switch o := obj.(type) {
			case *authnv1.TokenReview:
				if user, ok := tokens[o.Spec.Token]; ok {
					o.Status.Authenticated, o.Status.User.Username = true, user
				}
			case *authzv1.SubjectAccessReview:
				o.Status.Allowed = o.Spec.User == allowed
			}
			return nil
		},
	}).Build()
}
