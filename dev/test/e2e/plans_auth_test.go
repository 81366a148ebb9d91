package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/plan"
)

// TestPlansRequireStackAccess: the full plans are served only to a caller
// who may get the Stack, as its logs are (TokenReview + SubjectAccessReview,
// over the logs listener's HTTPS), and no longer on the plain-HTTP metrics
// port: no credentials is 401, a token of a ServiceAccount without get on
// the Stack 403, one with it 200. `stackpilot plan` reads the full plan
// through the API server's service proxy with the kubeconfig user's token.
func TestPlansRequireStackAccess(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	cliBinary(t)
	f := newFixture(t)
	ip := hostIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	g.Expect(ln.Close()).To(Succeed())
	f.start(t, fmt.Sprintf("--logs-bind-address=%s:%d", ip, port))
	exposeLogs(t, f.ns, ip, port)

	s := f.stack("guarded", func(s *v1alpha1.Stack) {
		s.Spec.Outputs = nil
		s.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
	})
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	pending := waitPendingPlan(t, client.ObjectKeyFromObject(s), f.commit, "")

	reader := serviceAccountKubeconfig(t, f.ns, "plan-reader", true)
	outsider := serviceAccountKubeconfig(t, f.ns, "plan-outsider", false)
	get := func(url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("X-Stackpilot-Token", token)
		}
		resp, err := insecureTLSClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	path := "/plans/" + f.ns + "/guarded"

	code, body := get("http://"+f.ctrl.MetricsAddr+path, "")
	g.Expect(code).To(Equal(http.StatusNotFound), "the metrics port serves no plan: %s", body)
	g.Expect(body).NotTo(ContainSubstring(pending.ID))

	base := fmt.Sprintf("https://%s:%d", ip, port)
	code, body = get(base+path, "")
	g.Expect(code).To(Equal(http.StatusUnauthorized), body)
	g.Expect(body).To(ContainSubstring("no bearer token"))
	code, body = get(base+path, "not-a-token")
	g.Expect(code).To(Equal(http.StatusUnauthorized), body)
	code, body = get(base+path, kubeconfigToken(t, outsider))
	g.Expect(code).To(Equal(http.StatusForbidden), body)
	g.Expect(body).To(ContainSubstring(fmt.Sprintf("system:serviceaccount:%s:plan-outsider may not get stacks.stackpilot.dev", f.ns)))
	g.Expect(body).NotTo(ContainSubstring(pending.ID))
	code, body = get(base+path+"/"+pending.ID, kubeconfigToken(t, outsider))
	g.Expect(code).To(Equal(http.StatusForbidden), body)

	for _, p := range []string{path, path + "/" + pending.ID} {
		code, body = get(base+p, kubeconfigToken(t, reader))
		g.Expect(code).To(Equal(http.StatusOK), body)
		var d plan.Document
		g.Expect(json.Unmarshal([]byte(body), &d)).To(Succeed(), body)
		g.Expect(d.ID).To(Equal(pending.ID))
	}

	// The CLI, as a user allowed to get the Stack, through the service proxy.
	out, errOut, code := logsCLI(t, reader, f.ns, "plan", s.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(errOut).To(BeEmpty(), "the full plan was read, no fallback")
	g.Expect(out).To(ContainSubstring("Plan:      " + pending.ID + " made "))
	g.Expect(out).To(MatchRegexp(`(?m)^ \+   └─ kubernetes:core/v1:ConfigMap +settings +create$`))
}

// insecureTLSClient reaches the controller's logs listener, whose
// certificate is self-signed.
var insecureTLSClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the controller's self-signed certificate

var readerTokens sync.Map // namespace -> token

// stackReaderToken is a token of the ServiceAccount stack-reader of ns,
// made once, which may get and list the Stacks of ns.
func stackReaderToken(t *testing.T, ns string) string {
	t.Helper()
	if tok, ok := readerTokens.Load(ns); ok {
		return tok.(string)
	}
	tok := kubeconfigToken(t, serviceAccountKubeconfig(t, ns, "stack-reader", true))
	readerTokens.Store(ns, tok)
	return tok
}

// kubeconfigToken is the bearer token of a kubeconfig's current user.
func kubeconfigToken(t *testing.T, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
}
