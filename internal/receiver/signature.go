package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
)

// ErrUnauthorized is a request whose signature (or token) is missing or
// does not match the Receiver's secret.
var ErrUnauthorized = errors.New("missing or invalid signature")

// Verify checks the request's signature against token for a Receiver of
// type typ, in constant time. generic has none (the secret URL path is the
// credential). oci checks X-Signature as generic-hmac does; a request
// without one is refused unless acceptUnsigned (spec.acceptUnsigned, for
// registries that cannot sign): otherwise dropping the header would pass
// where a wrong signature fails.
func Verify(typ string, h http.Header, body, token []byte, acceptUnsigned bool) error {
	switch typ {
	case "github":
		return prefixedHMAC(h.Get("X-Hub-Signature-256"), body, token)
	case "bitbucket":
		return prefixedHMAC(h.Get("X-Hub-Signature"), body, token)
	case "generic-hmac":
		return prefixedHMAC(h.Get("X-Signature"), body, token)
	case "gitea":
		sig := h.Get("X-Gitea-Signature")
		if sig == "" {
			sig = h.Get("X-Gogs-Signature")
		}
		return hexHMAC(sig, body, token)
	case "gitlab":
		got := h.Get("X-Gitlab-Token")
		if got == "" || subtle.ConstantTimeCompare([]byte(got), token) != 1 {
			return ErrUnauthorized
		}
		return nil
	case "oci":
		sig := h.Get("X-Signature")
		if sig == "" && acceptUnsigned {
			return nil
		}
		return prefixedHMAC(sig, body, token)
	case "generic":
		return nil
	}
	return ErrUnauthorized
}

// prefixedHMAC checks "sha256=<hex HMAC-SHA256 of body>".
func prefixedHMAC(header string, body, token []byte) error {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return ErrUnauthorized
	}
	return hexHMAC(hexSig, body, token)
}

func hexHMAC(hexSig string, body, token []byte) error {
	got, err := hex.DecodeString(strings.TrimSpace(hexSig))
	if err != nil || len(got) != sha256.Size {
		return ErrUnauthorized
	}
	if !hmac.Equal(got, Sign(body, token)) {
		return ErrUnauthorized
	}
	return nil
}

// Sign is the HMAC-SHA256 of body with token.
func Sign(body, token []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write(body)
	return m.Sum(nil)
}

// WebhookPath is a Receiver's URL path: /hook/ + the hex SHA-256 of token,
// name and namespace. Knowing it takes the token; it changes with it.
func WebhookPath(token []byte, name, namespace string) string {
	sum := sha256.Sum256([]byte(string(token) + name + namespace))
	return "/hook/" + hex.EncodeToString(sum[:])
}
