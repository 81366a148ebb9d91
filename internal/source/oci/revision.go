package oci

import (
	"fmt"
	"regexp"
	"strings"
)

// Ref is what a Stack follows in a repository; at most one field is set and
// none means the tag "latest".
type Ref struct {
	Tag, SemVer, Digest string
}

// DefaultTag is followed when a Stack names no ref, as docker and Flux do.
const DefaultTag = "latest"

func (r Ref) String() string {
	switch {
	case r.Digest != "":
		return "digest " + r.Digest
	case r.SemVer != "":
		return "semver " + r.SemVer
	case r.Tag != "":
		return "tag " + r.Tag
	}
	return "tag " + DefaultTag
}

// Revision is a resolved artifact: the tag it was found under (empty for a
// digest pin) and its manifest digest.
type Revision struct {
	Tag    string
	Digest string
}

// String is Flux's form of an OCI revision: "TAG@sha256:HEX", or the bare
// digest for a pin.
func (r Revision) String() string {
	if r.Tag == "" {
		return r.Digest
	}
	return r.Tag + "@" + r.Digest
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ParseRevision reads a revision String wrote (it is recorded in status).
func ParseRevision(s string) (Revision, error) {
	tag, digest, ok := strings.Cut(s, "@")
	if !ok {
		tag, digest = "", s
	}
	if !digestRE.MatchString(digest) {
		return Revision{}, fmt.Errorf("not an OCI revision: %q (want TAG@sha256:HEX or sha256:HEX)", s)
	}
	return Revision{Tag: tag, Digest: digest}, nil
}

// RefString names a resolved artifact for messages:
// "oci://host/repo:TAG@sha256:HEX", or "oci://host/repo@sha256:HEX" for a pin.
func RefString(repository string, rev Revision) string {
	if rev.Tag == "" {
		return "oci://" + repository + "@" + rev.Digest
	}
	return "oci://" + repository + ":" + rev.Tag + "@" + rev.Digest
}
