package oci

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Reference is one artifact: a repository ("host[:port]/path") and a tag
// or a digest (never both).
type Reference struct {
	Repository string
	Tag        string
	Digest     string // "sha256:…"
}

// String gives "host/repo:tag" or "host/repo@sha256:…" (no "oci://").
func (r Reference) String() string {
	switch {
	case r.Digest != "":
		return r.Repository + "@" + r.Digest
	case r.Tag != "":
		return r.Repository + ":" + r.Tag
	}
	return r.Repository
}

// Registry is the host[:port] part of the repository.
func (r Reference) Registry() string {
	host, _, _ := strings.Cut(r.Repository, "/")
	return host
}

// ParseURL turns "oci://host[:port]/path" into "host[:port]/path".
func ParseURL(url string) (string, error) {
	rest, ok := strings.CutPrefix(url, URLPrefix)
	if !ok {
		return "", fmt.Errorf("invalid OCI URL %q: it must start with %q, e.g. oci://ghcr.io/org/app", url, URLPrefix)
	}
	if strings.ContainsAny(rest, "@") || lastColonIsTag(rest) {
		return "", fmt.Errorf("invalid OCI URL %q: give the repository only, without a tag or digest (set those in the ref)", url)
	}
	if _, err := validRepository(rest); err != nil {
		return "", fmt.Errorf("invalid OCI URL %q: %w", url, err)
	}
	return rest, nil
}

// lastColonIsTag reports whether s ends in ":tag" after its last "/", as
// opposed to the ":port" of a bare host.
func lastColonIsTag(s string) bool {
	i := strings.LastIndex(s, "/")
	if i < 0 {
		return false // "host:port" alone; validRepository refuses the missing path
	}
	return strings.Contains(s[i+1:], ":")
}

func validRepository(s string) (name.Repository, error) {
	host, path, ok := strings.Cut(s, "/")
	if !ok || host == "" || path == "" {
		return name.Repository{}, fmt.Errorf("it needs a registry host and a repository path, e.g. ghcr.io/org/app")
	}
	// StrictValidation stops go-containerregistry from guessing Docker
	// Hub or "latest": what the user wrote is what we use.
	repo, err := name.NewRepository(s, name.StrictValidation)
	if err != nil {
		return name.Repository{}, fmt.Errorf("bad repository: %w", err)
	}
	return repo, nil
}

// validTag is the OCI distribution spec's tag grammar.
var validTag = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// ParseReference parses "oci://host/repo:tag" or "oci://host/repo@sha256:…".
func ParseReference(s string) (Reference, error) {
	rest, ok := strings.CutPrefix(s, URLPrefix)
	if !ok {
		return Reference{}, fmt.Errorf("invalid OCI reference %q: it must start with %q, e.g. oci://ghcr.io/org/app:v1", s, URLPrefix)
	}
	var ref Reference
	if repo, dgst, ok := strings.Cut(rest, "@"); ok {
		if lastColonIsTag(repo) {
			return Reference{}, fmt.Errorf("invalid OCI reference %q: give a tag or a digest, not both", s)
		}
		if _, err := v1.NewHash(dgst); err != nil || !strings.HasPrefix(dgst, "sha256:") {
			return Reference{}, fmt.Errorf("invalid OCI reference %q: bad digest %q, want sha256: and 64 lowercase hex digits", s, dgst)
		}
		ref = Reference{Repository: repo, Digest: dgst}
	} else if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") && strings.Contains(rest, "/") {
		ref = Reference{Repository: rest[:i], Tag: rest[i+1:]}
		if !validTag.MatchString(ref.Tag) {
			return Reference{}, fmt.Errorf("invalid OCI reference %q: bad tag %q: a tag is up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'", s, ref.Tag)
		}
	} else {
		return Reference{}, fmt.Errorf("invalid OCI reference %q: add a tag (:v1) or a digest (@sha256:…)", s)
	}
	if _, err := validRepository(ref.Repository); err != nil {
		return Reference{}, fmt.Errorf("invalid OCI reference %q: %w", s, err)
	}
	return ref, nil
}

// name turns the reference into go-containerregistry's form.
func (r Reference) name(opts ...name.Option) (name.Reference, error) {
	if r.Digest == "" && r.Tag == "" {
		return nil, fmt.Errorf("reference %q has neither tag nor digest", r.Repository)
	}
	ref, err := name.ParseReference(r.String(), append(opts, name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("invalid reference %q: %w", r.String(), err)
	}
	return ref, nil
}
