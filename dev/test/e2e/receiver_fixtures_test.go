package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/receiver"
)

const webhookToken = "e2e-webhook-token-5ecret"

// createReceiver makes a Receiver of typ with its token Secret and returns
// its webhook URL once it is Ready.
func createReceiver(t *testing.T, ns string, ctrl *controllerProcess, name, typ string, mutate ...func(*v1alpha1.Receiver)) string {
	t.Helper()
	createSecret(t, ns, name+"-token", map[string]string{"token": webhookToken})
	rcv := &v1alpha1.Receiver{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.ReceiverSpec{Type: typ, SecretRef: v1alpha1.LocalObjectReference{Name: name + "-token"}},
	}
	for _, m := range mutate {
		m(rcv)
	}
	if err := env.Client.Create(context.Background(), rcv); err != nil {
		t.Fatal(err)
	}
	var path string
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(rcv), rcv)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(rcv.Status.Conditions, v1alpha1.ReadyCondition)).To(BeTrue(), "%+v", rcv.Status.Conditions)
		path = rcv.Status.WebhookPath
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	if want := receiver.WebhookPath([]byte(webhookToken), name, ns); path != want {
		t.Fatalf("status.webhookPath = %q, want %q", path, want)
	}
	return "http://" + ctrl.WebhookAddr + path
}

// githubPush is a GitHub push event body for repoURL's branch.
func githubPush(repoURL, branch, after string) []byte {
	body, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/" + branch, "after": after,
		"repository": map[string]any{"clone_url": repoURL, "html_url": repoURL, "default_branch": "main"},
	})
	return body
}

// hookResult is what the webhook answered.
type hookResult struct {
	Code    int
	Outcome string `json:"outcome"`
	Stacks  int    `json:"stacks"`
}

// post sends body to url with headers (name, value, ...).
func post(t *testing.T, method, url string, body []byte, headers ...string) hookResult {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := hookResult{Code: resp.StatusCode}
	_ = json.Unmarshal(data, &r)
	return r
}

// postGitHub posts body as GitHub does: signed with token (unless empty),
// with a delivery id.
func postGitHub(t *testing.T, url string, body []byte, token, delivery string) hookResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	if token != "" {
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(receiver.Sign(body, []byte(token))))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := hookResult{Code: resp.StatusCode}
	_ = json.Unmarshal(data, &r)
	if r.Outcome == "" {
		t.Logf("webhook answer %d: %s", resp.StatusCode, data)
	}
	return r
}

// receiverEvents reads stackpilot_receiver_events_total for one outcome.
func receiverEvents(t *testing.T, ctrl *controllerProcess, typ, outcome string) int {
	t.Helper()
	n, err := ctrl.Metric("stackpilot_receiver_events_total", fmt.Sprintf("type=%q", typ), fmt.Sprintf("outcome=%q", outcome))
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func hexSign(body []byte, token string) string {
	return hex.EncodeToString(receiver.Sign(body, []byte(token)))
}
