package receiver

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The answers that need no Kubernetes: every path that returns before
// Stacks are asked (a nil Requester would panic if one were reached).
func TestServerRefusesAndIgnores(t *testing.T) {
	idx := NewIndex()
	token := []byte("tok")
	path := WebhookPath(token, "r", "ns")
	target := &Target{Key: types.NamespacedName{Namespace: "ns", Name: "r"}, Type: "github", Token: token}
	idx.Set(path, target)
	srv := NewServer(idx, nil, nil, logr.Discard())
	send := func(event, delivery string, body []byte, sign bool) (int, string) {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", delivery)
		if sign {
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(Sign(body, token)))
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var r result
		_ = json.Unmarshal(rec.Body.Bytes(), &r)
		return rec.Code, r.Outcome
	}
	check := func(what string, code int, outcome string, wantCode int, wantOutcome string) {
		t.Helper()
		if code != wantCode || outcome != wantOutcome {
			t.Errorf("%s: %d %s, want %d %s", what, code, outcome, wantCode, wantOutcome)
		}
	}
	push := []byte(`{"ref":"refs/heads/main","repository":{"clone_url":"https://h/o/r"}}`)
	code, out := send("push", "1", push, false)
	check("unsigned", code, out, 401, OutcomeUnauthorized)
	code, out = send("push", "2", bytes.Repeat([]byte("x"), MaxBodySize+1), true)
	check("too large", code, out, 413, OutcomeTooLarge)
	code, out = send("ping", "3", []byte(`{}`), true)
	check("ping", code, out, 200, OutcomeIgnored)
	code, out = send("issues", "4", []byte(`{}`), true)
	check("filtered", code, out, 200, OutcomeIgnored)
	code, out = send("push", "5", []byte(`{`), true)
	check("not json", code, out, 400, OutcomeInvalid)

	target.Suspend = true
	code, out = send("push", "6", push, true)
	check("suspended", code, out, 200, OutcomeIgnored)
	code, out = send("push", "6", push, true)
	check("replayed", code, out, 200, OutcomeReplayed)
	// The delivery header is not signed: a new one does not make a new delivery.
	code, out = send("push", "6b", push, true)
	check("replayed with a new delivery id", code, out, 200, OutcomeReplayed)
	// An unsigned request does not burn the body it carries.
	other := []byte(`{"ref":"refs/heads/main","after":"2","repository":{"clone_url":"https://h/o/r"}}`)
	code, out = send("push", "7", other, false)
	check("unsigned", code, out, 401, OutcomeUnauthorized)
	code, out = send("push", "7", other, true)
	check("first signed delivery of that body", code, out, 200, OutcomeIgnored)

	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hook/nope", nil))
	check("unknown path", rec.Code, "", 404, "")
	idx.Delete(target.Key)
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
	check("deleted Receiver", rec.Code, "", 404, "")
}

func TestEventsTotalSeriesExistAtZero(t *testing.T) {
	n, err := testutil.GatherAndCount(metrics.Registry, "stackpilot_receiver_events_total")
	if err != nil {
		t.Fatal(err)
	}
	if n < 7*6 {
		t.Fatalf("%d series, want one per type and outcome (42)", n)
	}
}
