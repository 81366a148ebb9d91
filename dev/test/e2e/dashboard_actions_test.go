package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// dashboardApprover is the token of the ServiceAccount "approver" in ns,
// who may get, list and patch its Stacks (the rights kubectl would need to
// approve), and get and list its Receivers and Alerts.
func dashboardApprover(t *testing.T, ns string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	kubeconfig := serviceAccountKubeconfig(t, ns, "approver", true)
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approver-patch"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"stackpilot.dev"}, Resources: []string{"stacks"}, Verbs: []string{"patch"}},
			{APIGroups: []string{"stackpilot.dev"}, Resources: []string{"receivers", "alerts"}, Verbs: []string{"get", "list"}}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "approver-patch"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "approver-patch"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "approver", Namespace: ns}}})).To(Succeed())
	return kubeconfigToken(t, kubeconfig)
}

// TestDashboardApprovesThePlanShown: through a browser's session (cookie
// and CSRF token), the plan page's document is the pending plan; a reader
// without patch is refused; a stale plan id is refused; approving the
// shown id applies exactly that plan, recorded as approved by
// dashboard:<user>; the page's event stream tells of the Stack's changes
// while it runs; and the graph shows a three-Stack chain.
func TestDashboardApprovesThePlanShown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newApprovalFixture(t)
	f.start(t)
	logOnFailure(t, f.fixture)
	stack := f.approvalStack("manual", v1alpha1.ApprovalManual)
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	key := client.ObjectKeyFromObject(stack)

	// A chain: mid depends on manual, top reads mid's outputs.
	mid := f.stack("mid", func(s *v1alpha1.Stack) {
		s.Spec.Suspend = true
		s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "manual"}}
	})
	top := f.stack("top", func(s *v1alpha1.Stack) {
		s.Spec.Suspend = true
		s.Spec.ConfigFrom = []v1alpha1.ConfigFromSource{{StackOutputs: &v1alpha1.StackOutputsReference{Name: "mid"}}}
	})
	g.Expect(env.Client.Create(ctx, mid)).To(Succeed())
	g.Expect(env.Client.Create(ctx, top)).To(Succeed())

	approverToken := dashboardApprover(t, f.ns)

	session := func(token string) (cookie, csrf string) {
		body, _ := json.Marshal(map[string]string{"token": token})
		code, who, header := dashboardDo(t, f.ctrl, "POST", "/api/session", body, "Content-Type", "application/json")
		g.Expect(code).To(Equal(200), "%v", who)
		c := (&http.Request{Header: http.Header{"Cookie": {header.Get("Set-Cookie")}}}).Cookies()[0]
		return c.Name + "=" + c.Value, who["csrf"].(string)
	}
	approverCookie, approverCSRF := session(approverToken)
	readerCookie, readerCSRF := session(stackReaderToken(t, f.ns))

	// The page's event stream, read from the start.
	var mu sync.Mutex
	var events []string
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	req, _ := http.NewRequestWithContext(streamCtx, "GET", "https://"+f.ctrl.DashboardAddr+"/api/events", nil)
	req.Header.Set("Cookie", approverCookie)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the controller's self-signed certificate
	resp, err := (&http.Client{Transport: tr}).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				mu.Lock()
				events = append(events, data)
				mu.Unlock()
			}
		}
	}()

	s := waitPlan(t, key, f.commit, "", v1alpha1.AwaitingApprovalReason)
	plan := s.Status.PendingPlan
	code, doc, _ := dashboardDo(t, f.ctrl, "GET", "/api/stacks/"+f.ns+"/manual/plan/"+plan.ID, nil, "Cookie", approverCookie)
	g.Expect(code).To(Equal(200), "%v", doc)
	g.Expect(doc["id"]).To(Equal(plan.ID))
	g.Expect(doc["resources"]).NotTo(BeEmpty())

	approve := func(cookie, csrf, id string) (int, map[string]any) {
		body, _ := json.Marshal(map[string]string{"plan": id})
		code, out, _ := dashboardDo(t, f.ctrl, "POST", "/api/stacks/"+f.ns+"/manual/approve", body,
			"Cookie", cookie, "X-Stackpilot-CSRF", csrf, "Content-Type", "application/json", "Origin", "https://"+f.ctrl.DashboardAddr)
		return code, out
	}
	code, out := approve(readerCookie, readerCSRF, plan.ID)
	g.Expect(code).To(Equal(403), "a reader may not approve: %v", out)
	code, out = approve(approverCookie, "", plan.ID)
	g.Expect(code).To(Equal(403), "no CSRF token: %v", out)
	code, out = approve(approverCookie, approverCSRF, "not-the-plan")
	g.Expect(code).To(Equal(409), "%v", out)
	g.Expect(getStack(g, key).Annotations).NotTo(HaveKey(v1alpha1.ApproveAnnotation))
	code, out = approve(approverCookie, approverCSRF, plan.ID)
	g.Expect(code).To(Equal(200), "%v", out)

	g.Eventually(func(g Gomega) {
		s := getStack(g, key)
		ups := records(s, v1alpha1.OperationUp)
		g.Expect(ups).NotTo(BeEmpty(), "Ready: %s", readyMessage(s))
		g.Expect(ups[0].Outcome).To(Equal(v1alpha1.OutcomeSucceeded), "%+v", ups[0])
		g.Expect(ups[0].Plan).To(Equal(plan.ID))
		g.Expect(ups[0].ApprovedBy).To(Equal("dashboard:system:serviceaccount:" + f.ns + ":approver"))
	}, 5*time.Minute, time.Second).Should(Succeed())
	g.Eventually(func() []string {
		mu.Lock()
		defer mu.Unlock()
		return events
	}, time.Minute, 200*time.Millisecond).Should(ContainElement(`{"kind":"Stack","namespace":"` + f.ns + `","name":"manual"}`))

	code, graph, _ := dashboardDo(t, f.ctrl, "GET", "/api/graph?namespace="+f.ns, nil, "Cookie", readerCookie)
	g.Expect(code).To(Equal(200), "%v", graph)
	var edges []string
	for _, e := range graph["edges"].([]any) {
		m := e.(map[string]any)
		edges = append(edges, m["from"].(string)+">"+m["to"].(string)+":"+m["kind"].(string))
	}
	g.Expect(edges).To(ConsistOf(f.ns+"/mid>"+f.ns+"/manual:dependsOn", f.ns+"/top>"+f.ns+"/mid:stackOutputs"))
}
