package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
	"github.com/stackpilot/stackpilot/internal/plan/plantest"
	"github.com/stackpilot/stackpilot/internal/wire"
)

func TestPlanHandler(t *testing.T) {
	g := NewWithT(t)
	s, err := plan.NewStore(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	stack := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1"},
		Status: v1alpha1.StackStatus{PendingPlan: &v1alpha1.PendingPlan{ID: "plan-1"}}}
	other := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "idle", UID: "uid-2"}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stack, other).Build()
	h := &PlanHandler{Store: s, Reader: reader, Client: reviews(map[string]string{"alice-token": "alice", "bob-token": "bob"}, "alice")}
	plantest.Stored(t, s, "uid-1", "plan-1")
	plantest.Stored(t, s, "uid-1", "plan-0")

	getAs := func(token, path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set(wire.TokenHeader, token)
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
	// The policy input: the stored update plan, to the same readers only.
	code, body = get("/plans/ns/web?content=policy-input")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body["apiVersion"]).To(Equal(plan.PolicyInputAPIVersion))
	g.Expect(body["id"]).To(Equal("plan-1"))
	g.Expect(body["plan"]).To(Equal(map[string]any{"pulumi": "plan"}), "plantest's stand-in for the update plan")
	code, _ = getAs("bob-token", "/plans/ns/web?content=policy-input")
	g.Expect(code).To(Equal(http.StatusForbidden))
	code, body = get("/plans/ns/web?content=values")
	g.Expect(code).To(Equal(http.StatusBadRequest))
	g.Expect(body["error"]).To(ContainSubstring("want policy-input"))
	for path, want := range map[string]string{
		"/plans/ns/web/plan-9?content=policy-input": "no plan",
		"/plans/ns/web/plan-9":                      "no plan",
		"/plans/ns/idle":                            "no pending plan",
		"/plans/ns/gone":                            "no Stack",
		"/plans/ns":                                 "use /plans/",
		"/plans/ns/web/a/b":                         "use /plans/",
	} {
		code, body := get(path)
		g.Expect(code).To(Equal(http.StatusNotFound), path)
		g.Expect(body["error"]).To(ContainSubstring(want), path)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/plans/ns/web", strings.NewReader("")))
	g.Expect(rec.Code).To(Equal(http.StatusMethodNotAllowed))
}

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
