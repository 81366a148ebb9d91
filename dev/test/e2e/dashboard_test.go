package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// dashboardGet sends method path to the controller's dashboard with
// headers, and answers the status and the JSON body.
func dashboardDo(t *testing.T, ctrl *controllerProcess, method, path string, body []byte, headers ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+ctrl.DashboardAddr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the controller's self-signed certificate
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out, resp.Header
}

// TestDashboardFleet: the controller's dashboard lists the fleet as the
// caller's own identity may see it: a reader of the namespace sees its
// Stacks, with the counts by state that the Stacks' conditions say; a
// user with no rights sees none; a browser session signs in with a token,
// gets a cookie, and cannot change anything without the CSRF token.
func TestDashboardFleet(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	applied := f.stack("applied")
	g.Expect(env.Client.Create(ctx, applied)).To(Succeed())
	waitApplied(t, client.ObjectKeyFromObject(applied), f.commit)
	paused := f.stack("paused", func(s *v1alpha1.Stack) { s.Spec.Suspend = true })
	g.Expect(env.Client.Create(ctx, paused)).To(Succeed())

	reader := "Bearer " + stackReaderToken(t, f.ns)
	nobody := "Bearer " + kubeconfigToken(t, serviceAccountKubeconfig(t, f.ns, "nobody", false))

	// Both reconciled (a suspended Stack is Ready, reason Suspended, as
	// kubectl shows it), then what the API server says, counted as the page
	// counts, against the page (which reads the controller's cache: it may
	// lag a moment).
	g.Eventually(func(g Gomega) {
		s := getStack(g, client.ObjectKeyFromObject(paused))
		g.Expect(apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition)).NotTo(BeNil())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	var list v1alpha1.StackList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
	ready, suspended := 0, 0
	for _, s := range list.Items {
		if apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition) {
			ready++
		}
		if s.Spec.Suspend {
			suspended++
		}
	}
	g.Expect(suspended).To(Equal(1))
	var header http.Header
	g.Eventually(func(g Gomega) {
		code, fleet, h := dashboardDo(t, f.ctrl, "GET", "/api/fleet?namespace="+f.ns, nil, "Authorization", reader)
		g.Expect(code).To(Equal(200), "%v", fleet)
		g.Expect(fleet["total"]).To(BeEquivalentTo(2))
		g.Expect(fleet["counts"]).To(HaveKeyWithValue("Ready", BeEquivalentTo(ready)))
		g.Expect(fleet["counts"]).To(HaveKeyWithValue("Suspended", BeEquivalentTo(suspended)))
		g.Expect(fleet["user"]).To(Equal("system:serviceaccount:" + f.ns + ":stack-reader"))
		header = h
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Expect(header.Get("Content-Security-Policy")).To(ContainSubstring("default-src 'self'"))

	// One Stack: to its reader, and 403 for another namespace's.
	code, view, _ := dashboardDo(t, f.ctrl, "GET", "/api/stacks/"+f.ns+"/applied", nil, "Authorization", reader)
	g.Expect(code).To(Equal(200), "%v", view)
	g.Expect(view["history"]).NotTo(BeEmpty())
	g.Expect(view["revision"]).To(HaveSuffix(f.commit))
	code, _, _ = dashboardDo(t, f.ctrl, "GET", "/api/stacks/kube-system/anything", nil, "Authorization", reader)
	g.Expect(code).To(Equal(403))
	code, _, _ = dashboardDo(t, f.ctrl, "GET", "/api/stacks/"+f.ns+"/applied", nil, "Authorization", nobody)
	g.Expect(code).To(Equal(403))

	code, fleet, _ := dashboardDo(t, f.ctrl, "GET", "/api/fleet", nil, "Authorization", nobody)
	g.Expect(code).To(Equal(200), "%v", fleet)
	g.Expect(fleet["total"]).To(BeEquivalentTo(0), "a user who may get no Stack sees none")
	code, _, _ = dashboardDo(t, f.ctrl, "GET", "/api/fleet", nil, "Authorization", "Bearer not-a-token")
	g.Expect(code).To(Equal(401))

	// A browser's session.
	body, _ := json.Marshal(map[string]string{"token": stackReaderToken(t, f.ns)})
	code, who, header := dashboardDo(t, f.ctrl, "POST", "/api/session", body, "Content-Type", "application/json")
	g.Expect(code).To(Equal(200), "%v", who)
	cookie := header.Get("Set-Cookie")
	g.Expect(cookie).To(ContainSubstring("HttpOnly"))
	g.Expect(cookie).To(ContainSubstring("SameSite=Strict"))
	session := (&http.Request{Header: http.Header{"Cookie": {cookie}}}).Cookies()[0]
	sessionCookie := session.Name + "=" + session.Value
	code, fleet, _ = dashboardDo(t, f.ctrl, "GET", "/api/fleet", nil, "Cookie", sessionCookie)
	g.Expect(code).To(Equal(200))
	g.Expect(fleet["total"]).To(BeEquivalentTo(2))
	code, _, _ = dashboardDo(t, f.ctrl, "DELETE", "/api/session", nil, "Cookie", sessionCookie)
	g.Expect(code).To(Equal(403), "a change without the CSRF token")
	code, _, _ = dashboardDo(t, f.ctrl, "DELETE", "/api/session", nil, "Cookie", sessionCookie, "X-Stackpilot-CSRF", who["csrf"].(string))
	g.Expect(code).To(Equal(204))
}
