package git

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/stackpilot/stackpilot/internal/source"
)

// Secret data keys, as Flux's GitRepository reads them.
const (
	KeyUsername    = "username"
	KeyPassword    = "password"
	KeyBearerToken = "bearerToken"
	KeyIdentity    = "identity"
	KeyKnownHosts  = "known_hosts"
	KeyCA          = "ca.crt"
	keyCALegacy    = "caFile"
)

// Auth is how to authenticate to one repository, built from a Secret's data
// by NewAuth. A nil *Auth means anonymous access.
//
// Auth never exposes the secret values: String and errors name keys only,
// and Digest identifies the credentials without revealing them.
type Auth struct {
	method   transport.AuthMethod
	caBundle []byte
	digest   string
	kind     string
	// secrets are values scrubbed from any third-party message we quote.
	secrets []string
}

// NewAuth maps Secret data to the credentials for repoURL:
//
//   - http(s): "username" and "password" (basic auth), or "bearerToken"
//     (Authorization: Bearer); "ca.crt" adds a CA bundle.
//   - ssh: "identity" (a private key, PEM or OpenSSH), "password" if that
//     key is encrypted, and "known_hosts", which is required: a server we
//     cannot verify is never trusted.
//
// Empty data means anonymous access, except over SSH, which always needs a
// key. Problems with the data are *source.AuthError values naming the key.
func NewAuth(repoURL string, data map[string][]byte) (*Auth, error) {
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return nil, &source.InvalidSpecError{Field: "url", Value: source.RedactURL(repoURL), Reason: "not a Git URL"}
	}
	url := source.RedactURL(repoURL)
	if ep.Protocol == "ssh" {
		return sshAuth(url, ep, data)
	}
	if len(data) == 0 {
		return nil, nil
	}
	a := &Auth{digest: digestData(data), kind: "anonymous"}
	if ca := first(data, KeyCA, keyCALegacy); len(ca) > 0 {
		a.caBundle = ca
	}
	user, pass, token := data[KeyUsername], data[KeyPassword], data[KeyBearerToken]
	switch {
	case len(token) > 0 && (len(user) > 0 || len(pass) > 0):
		return nil, &source.AuthError{URL: url, Key: KeyBearerToken, Reason: "cannot be combined with username/password; keep one of them"}
	case len(token) > 0:
		a.method = &githttp.TokenAuth{Token: string(token)}
		a.kind = "bearer token"
		a.secrets = []string{string(token)}
	case len(user) > 0:
		a.method = &githttp.BasicAuth{Username: string(user), Password: string(pass)}
		a.kind = "basic"
		a.secrets = []string{string(pass)}
	case len(pass) > 0:
		return nil, &source.AuthError{URL: url, Key: KeyUsername, Reason: "is required with password"}
	}
	return a, nil
}

func sshAuth(url string, ep *transport.Endpoint, data map[string][]byte) (*Auth, error) {
	identity, knownHosts := data[KeyIdentity], data[KeyKnownHosts]
	if len(identity) == 0 {
		return nil, &source.AuthError{URL: url, Key: KeyIdentity, Reason: "is required for SSH: set it to a private key the server accepts"}
	}
	if len(knownHosts) == 0 {
		return nil, &source.AuthError{URL: url, Key: KeyKnownHosts, Reason: "is required for SSH: without it the server's identity cannot be verified"}
	}
	user := ep.User
	if user == "" {
		user = string(data[KeyUsername])
	}
	if user == "" {
		user = "git"
	}
	pass := string(data[KeyPassword])
	signer, err := ssh.ParsePrivateKey(identity)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		if pass == "" {
			return nil, &source.AuthError{URL: url, Key: KeyPassword, Reason: "is required: the identity is encrypted"}
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase(identity, []byte(pass))
	}
	if err != nil {
		return nil, &source.AuthError{URL: url, Key: KeyIdentity, Reason: "cannot be parsed as a private key (or the password is wrong): " + source.Redact(err.Error(), pass), Err: err}
	}
	keys := &gitssh.PublicKeys{User: user, Signer: signer}
	hostWithPort := net.JoinHostPort(ep.Host, strconv.Itoa(portOr22(ep.Port)))
	callback, algorithms, err := hostKeyCheck(knownHosts, hostWithPort)
	if err != nil {
		return nil, &source.AuthError{URL: url, Key: KeyKnownHosts, Reason: err.Error()}
	}
	keys.HostKeyCallback = callback
	// go-git only picks host key algorithms from known_hosts when it owns
	// the callback; without them the server may present a key type we have
	// no entry for and the check fails although the host is known.
	keys.HostKeyAlgorithms = algorithms
	return &Auth{
		method:  keys,
		digest:  digestData(data),
		kind:    "ssh key",
		secrets: []string{pass},
	}, nil
}

func portOr22(p int) int {
	if p == 0 {
		return 22
	}
	return p
}

// hostKeyCheck builds a host key callback from known_hosts content. The
// parsers only read files, so the content goes through a short-lived temp
// file; it is public data.
func hostKeyCheck(knownHosts []byte, hostWithPort string) (ssh.HostKeyCallback, []string, error) {
	f, err := os.CreateTemp("", "stackpilot-known-hosts-")
	if err != nil {
		return nil, nil, fmt.Errorf("cannot be used: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(knownHosts)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, nil, fmt.Errorf("cannot be used: %w", werr)
	}
	db, err := gitssh.NewKnownHostsDb(f.Name())
	if err != nil {
		return nil, nil, errors.New("cannot be parsed (expected known_hosts lines, as ssh-keyscan prints)")
	}
	algorithms := db.HostKeyAlgorithms(hostWithPort)
	if len(algorithms) == 0 {
		return nil, nil, fmt.Errorf("has no entry for %s (ssh-keyscan -p PORT HOST prints one)", hostWithPort)
	}
	return db.HostKeyCallback(), algorithms, nil
}

// digestData identifies Secret data without revealing it: sha256 over the
// keys in order, each with its length-prefixed value.
func digestData(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	var n [8]byte
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		binary.BigEndian.PutUint64(n[:], uint64(len(data[k])))
		h.Write(n[:])
		h.Write(data[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func first(data map[string][]byte, keys ...string) []byte {
	for _, k := range keys {
		if v := data[k]; len(v) > 0 {
			return v
		}
	}
	return nil
}

// Method returns the go-git auth method (nil for anonymous access).
func (a *Auth) Method() transport.AuthMethod {
	if a == nil {
		return nil
	}
	return a.method
}

// CABundle returns extra CA certificates for HTTPS, if any.
func (a *Auth) CABundle() []byte {
	if a == nil {
		return nil
	}
	return a.caBundle
}

// Digest identifies the credentials for cache keys: "sha256:<hex>" of the
// Secret data, or "" for anonymous access.
func (a *Auth) Digest() string {
	if a == nil {
		return ""
	}
	return a.digest
}

// String describes the credentials without revealing them, so an Auth that
// ends up in a log line leaks nothing.
func (a *Auth) String() string {
	if a == nil {
		return "anonymous"
	}
	return fmt.Sprintf("%s (%s)", a.kind, a.digest)
}

// GoString keeps %#v from printing the fields.
func (a *Auth) GoString() string { return a.String() }

// redact scrubs secret values from a third-party message.
func (a *Auth) redact(s string) string {
	if a == nil {
		return s
	}
	return source.Redact(s, a.secrets...)
}
