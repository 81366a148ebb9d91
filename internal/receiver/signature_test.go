package receiver

import (
	"encoding/hex"
	"net/http"
	"testing"
)

func TestVerify(t *testing.T) {
	body := []byte(`{"ref":"refs/heads/main"}`)
	token := []byte("s3cret")
	good := hex.EncodeToString(Sign(body, token))
	bad := hex.EncodeToString(Sign(body, []byte("other")))
	for _, tc := range []struct {
		typ, header, value string
		ok                 bool
	}{
		{"github", "X-Hub-Signature-256", "sha256=" + good, true},
		{"github", "X-Hub-Signature-256", "sha256=" + bad, false},
		{"github", "X-Hub-Signature-256", good, false}, // no prefix
		{"github", "X-Hub-Signature-256", "sha256=zz", false},
		{"github", "X-Hub-Signature", "sha256=" + good, false}, // wrong header
		{"github", "", "", false},
		{"bitbucket", "X-Hub-Signature", "sha256=" + good, true},
		{"bitbucket", "X-Hub-Signature", "sha256=" + bad, false},
		{"generic-hmac", "X-Signature", "sha256=" + good, true},
		{"generic-hmac", "X-Signature", "sha256=" + good[:10], false},
		{"generic-hmac", "", "", false},
		{"gitea", "X-Gitea-Signature", good, true},
		{"gitea", "X-Gitea-Signature", bad, false},
		{"gitlab", "X-Gitlab-Token", "s3cret", true},
		{"gitlab", "X-Gitlab-Token", "s3cre", false},
		{"gitlab", "", "", false},
		{"generic", "", "", true},
		{"oci", "", "", true},
		{"oci", "X-Signature", "sha256=" + good, true},
		{"oci", "X-Signature", "sha256=" + bad, false},
		{"nonsense", "", "", false},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set(tc.header, tc.value)
		}
		err := Verify(tc.typ, h, body, token)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s=%q: err = %v, want ok=%v", tc.typ, tc.header, tc.value, err, tc.ok)
		}
	}
	// The body is what is signed.
	h := http.Header{"X-Hub-Signature-256": {"sha256=" + good}}
	if Verify("github", h, append(body, ' '), token) == nil {
		t.Error("a changed body passed the signature of the original")
	}
}

func TestWebhookPath(t *testing.T) {
	// sha256("tok" + "name" + "ns")
	got := WebhookPath([]byte("tok"), "name", "ns")
	if got != "/hook/70e05a5885ca315f6d6119a94a8000ebfd94fbc382382cbc1cf83d3c60e2e857" {
		t.Fatalf("WebhookPath = %q", got)
	}
	if WebhookPath([]byte("tok2"), "name", "ns") == got || WebhookPath([]byte("tok"), "name2", "ns") == got {
		t.Error("the path must change with the token and the name")
	}
}
