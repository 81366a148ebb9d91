package oci

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// Credentials for one registry: a username and password, or an identity
// token (OAuth2 refresh token) or registry token. The values are never
// printed: String and GoString name the registry only.
type Credentials struct {
	registry      string
	username      string
	password      string
	identityToken string
	registryToken string
}

func (c *Credentials) String() string {
	if c == nil {
		return "<anonymous>"
	}
	if c.registry == "" {
		return "<credentials>"
	}
	return "<credentials for " + c.registry + ">"
}

func (c *Credentials) GoString() string { return c.String() }

// Registry is the host the credentials were found for ("" for --creds).
func (c *Credentials) Registry() string {
	if c == nil {
		return ""
	}
	return c.registry
}

// idKey keys the fingerprints: a process-wide random key makes ID useless
// for guessing a password offline from a log line or a metric label, and
// the caches ID is for live in this process only.
var idKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}()

// ID is a non-secret fingerprint (a keyed hash, stable within the process)
// of the credentials, for cache keys; "" for anonymous.
func (c *Credentials) ID() string {
	if c == nil || c.empty() {
		return ""
	}
	m := hmac.New(sha256.New, idKey)
	for _, s := range []string{c.username, c.password, c.identityToken, c.registryToken} {
		fmt.Fprintf(m, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(m.Sum(nil))[:32]
}

func (c *Credentials) empty() bool {
	return c.username == "" && c.password == "" && c.identityToken == "" && c.registryToken == ""
}

// authenticator is what go-containerregistry sends.
func (c *Credentials) authenticator() authn.Authenticator {
	if c == nil || c.empty() {
		return authn.Anonymous
	}
	return authn.FromConfig(authn.AuthConfig{
		Username:      c.username,
		Password:      c.password,
		IdentityToken: c.identityToken,
		RegistryToken: c.registryToken,
	})
}

// CredentialsFromUserPass parses "user:pass" (--creds). The password may
// contain ':'.
func CredentialsFromUserPass(s string) (*Credentials, error) {
	user, pass, ok := strings.Cut(s, ":")
	if !ok || user == "" {
		return nil, errors.New("invalid credentials: want USERNAME:PASSWORD")
	}
	return &Credentials{username: user, password: pass}, nil
}

// dockerAuth is one entry of a Docker config's "auths".
type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// CredentialsFromDockerConfigJSON reads a kubernetes.io/dockerconfigjson
// Secret's .dockerconfigjson ({"auths": {HOST: …}}), or the old .dockercfg
// shape ({HOST: …}), and returns the entry for registry; nil, nil when it
// has none for that host.
func CredentialsFromDockerConfigJSON(data []byte, registry string) (*Credentials, error) {
	var doc struct {
		Auths map[string]dockerAuth `json:"auths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("invalid docker config JSON: %v", syntaxOnly(err))
	}
	auths := doc.Auths
	if auths == nil {
		var old map[string]dockerAuth
		if err := json.Unmarshal(data, &old); err != nil {
			return nil, fmt.Errorf("invalid docker config JSON: want {\"auths\": {HOST: {...}}}")
		}
		auths = old
	}
	want := normalizeRegistry(registry)
	for key, a := range auths {
		if normalizeRegistry(key) != want {
			continue
		}
		c, err := a.credentials(key)
		if err != nil {
			return nil, err
		}
		c.registry = registry
		return c, nil
	}
	return nil, nil
}

// syntaxOnly keeps the position of a JSON error but drops any quoted
// content, which could be part of a secret.
func syntaxOnly(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	}
	return "malformed JSON"
}

func (a dockerAuth) credentials(key string) (*Credentials, error) {
	c := &Credentials{username: a.Username, password: a.Password, identityToken: a.IdentityToken, registryToken: a.RegistryToken}
	if a.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return nil, fmt.Errorf("docker config entry %q: \"auth\" is not base64 of USERNAME:PASSWORD", key)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, fmt.Errorf("docker config entry %q: \"auth\" does not decode to USERNAME:PASSWORD", key)
		}
		c.username, c.password = user, pass
	}
	if c.empty() {
		return nil, fmt.Errorf("docker config entry %q has no auth, username/password or identitytoken", key)
	}
	return c, nil
}

// normalizeRegistry maps the spellings Docker accepts for a registry key
// ("https://host/v1/", "host") to the host, and Docker Hub's aliases to one.
func normalizeRegistry(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	s, _, _ = strings.Cut(s, "/")
	s = strings.ToLower(s)
	switch s {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		return "index.docker.io"
	}
	return s
}

// CredentialsFromDockerConfigFile reads $DOCKER_CONFIG/config.json or
// ~/.docker/config.json, including credHelpers and credsStore, through
// go-containerregistry's default keychain (Docker's own config code); nil,
// nil when it has none for registry.
func CredentialsFromDockerConfigFile(registry string) (*Credentials, error) {
	reg, err := name.NewRegistry(registry, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("invalid registry %q: %w", registry, err)
	}
	auth, err := authn.DefaultKeychain.Resolve(reg)
	if err != nil {
		return nil, fmt.Errorf("reading the Docker config for %s: %w", registry, err)
	}
	if auth == authn.Anonymous {
		return nil, nil
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return nil, fmt.Errorf("reading the Docker config for %s: %w", registry, err)
	}
	c := &Credentials{registry: registry, username: cfg.Username, password: cfg.Password, identityToken: cfg.IdentityToken, registryToken: cfg.RegistryToken}
	if cfg.Auth != "" && c.username == "" {
		a, err := dockerAuth{Auth: cfg.Auth}.credentials(registry)
		if err != nil {
			return nil, err
		}
		c.username, c.password = a.username, a.password
	}
	if c.empty() {
		return nil, nil
	}
	return c, nil
}
