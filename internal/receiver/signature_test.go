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
		acceptUnsigned     bool
	}{
		{"github", "X-Hub-Signature-256", "sha256=" + good, true, false},
		{"github", "X-Hub-Signature-256", "sha256=" + bad, false, false},
		{"github", "X-Hub-Signature-256", good, false, false}, // no prefix
		{"github", "X-Hub-Signature-256", "sha256=zz", false, false},
		{"github", "X-Hub-Signature", "sha256=" + good, false, false}, // wrong header
		{"github", "", "", false, false},
		{"bitbucket", "X-Hub-Signature", "sha256=" + good, true, false},
		{"bitbucket", "X-Hub-Signature", "sha256=" + bad, false, false},
		{"generic-hmac", "X-Signature", "sha256=" + good, true, false},
		{"generic-hmac", "X-Signature", "sha256=" + good[:10], false, false},
		{"generic-hmac", "", "", false, false},
		{"gitea", "X-Gitea-Signature", good, true, false},
		{"gitea", "X-Gitea-Signature", bad, false, false},
		{"gitlab", "X-Gitlab-Token", "s3cret", true, false},
		{"gitlab", "X-Gitlab-Token", "s3cre", false, false},
		{"gitlab", "", "", false, false},
		{"generic", "", "", true, false},
		{"oci", "", "", false, false}, // no signature: refused unless the Receiver opts in
		{"oci", "", "", true, true},
		{"oci", "X-Signature", "sha256=" + good, true, false},
		{"oci", "X-Signature", "sha256=" + bad, false, false},
		{"oci", "X-Signature", "sha256=" + bad, false, true}, // a sent signature is checked
		{"oci", "X-Signature", "", false, false},
		{"github", "", "", false, true}, // only oci may skip it
		{"nonsense", "", "", false, false},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set(tc.header, tc.value)
		}
		err := Verify(tc.typ, h, body, token, tc.acceptUnsigned)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s=%q acceptUnsigned=%v: err = %v, want ok=%v", tc.typ, tc.header, tc.value, tc.acceptUnsigned, err, tc.ok)
		}
	}
	// The body is what is signed.
	h := http.Header{"X-Hub-Signature-256": {"sha256=" + good}}
	if Verify("github", h, append(body, ' '), token, false) == nil {
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
