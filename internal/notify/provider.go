package notify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Target is an Alert's resolved endpoint: spec.provider with the Secret's
// address and token filled in.
type Target struct {
	Type    v1alpha1.ProviderType
	Address string
	Token   string
	Channel string
}

// Request is one HTTP request to send, rebuilt for each try.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// ErrSkip: the provider has nothing to say about this event (PagerDuty about
// an apply, GitHub about a Stack not from GitHub or about drift).
var ErrSkip = errors.New("the provider does not report this event")

// Build makes the request that tells t about ev. ev must be scrubbed.
func Build(t Target, ev Event) (*Request, error) {
	switch t.Type {
	case v1alpha1.ProviderSlack:
		return jsonPost(t.Address, slackPayload(t, ev))
	case v1alpha1.ProviderMSTeams:
		return jsonPost(t.Address, teamsPayload(ev))
	case v1alpha1.ProviderPagerDuty:
		p, ok := pagerDutyPayload(t, ev)
		if !ok {
			return nil, ErrSkip
		}
		return jsonPost(t.Address, p)
	case v1alpha1.ProviderGitHub:
		return gitHubRequest(t, ev)
	case v1alpha1.ProviderGeneric:
		return jsonPost(t.Address, ev)
	case v1alpha1.ProviderGenericHMAC:
		req, err := jsonPost(t.Address, ev)
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-Signature", Sign(t.Token, req.Body))
		return req, nil
	}
	return nil, fmt.Errorf("unknown provider type %q", t.Type)
}

// Sign is the X-Signature of a generic-hmac body, as our Receiver checks it:
// "sha256=" and the hex HMAC-SHA256 of the body keyed with the token.
func Sign(token string, body []byte) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func jsonPost(url string, payload any) (*Request, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "stackpilot-controller")
	return &Request{Method: http.MethodPost, URL: url, Header: h, Body: bytes.TrimRight(buf.Bytes(), "\n")}, nil
}
