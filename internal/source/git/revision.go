package git

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Ref says which revision of a repository to use. At most one of Branch,
// Tag and SemVer should be set; Commit pins an exact commit and may be
// combined with Branch or Tag to name it (and to clone less). All empty
// means the remote's default branch (what its HEAD points at).
type Ref struct {
	Branch string `json:"branch,omitempty"`
	Tag    string `json:"tag,omitempty"`
	// SemVer is a Masterminds/semver constraint ("^1.2", ">=1.0 <2"); the
	// highest tag satisfying it wins.
	SemVer string `json:"semver,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// String names the reference for messages: "branch main", "tag v1.0.0",
// "semver ^1.0", "commit 1a2b...", "HEAD".
func (r Ref) String() string {
	switch {
	case r.Commit != "":
		return "commit " + r.Commit
	case r.SemVer != "":
		return "tag matching semver " + r.SemVer
	case r.Tag != "":
		return "tag " + r.Tag
	case r.Branch != "":
		return "branch " + r.Branch
	}
	return "HEAD"
}

// Revision is a resolved reference.
type Revision struct {
	// Name is the branch or tag the commit was found by ("main",
	// "v1.2.0"); empty for a bare commit pin.
	Name string `json:"name,omitempty"`
	// Ref is the full reference name ("refs/heads/main",
	// "refs/tags/v1.2.0"), which lets Fetch clone just that reference.
	// Empty when unknown (a bare commit pin, or a parsed revision).
	Ref string `json:"ref,omitempty"`
	// Commit is the commit hash in hex.
	Commit string `json:"commit"`
}

// String formats the revision as Flux does: "main@sha1:<commit>", or
// "sha1:<commit>" for a bare commit ("sha256:" for SHA-256 repositories).
func (r Revision) String() string {
	algo := "sha1"
	if len(r.Commit) == 64 {
		algo = "sha256"
	}
	if r.Name == "" {
		return algo + ":" + r.Commit
	}
	return r.Name + "@" + algo + ":" + r.Commit
}

// ParseRevision parses the String form back. Ref is left empty: the name
// alone does not say whether it was a branch or a tag.
func ParseRevision(s string) (Revision, error) {
	name, digest := "", s
	if i := strings.LastIndex(s, "@"); i >= 0 {
		name, digest = s[:i], s[i+1:]
	}
	algo, commit, ok := strings.Cut(digest, ":")
	if !ok || (algo != "sha1" && algo != "sha256") || !isHex(commit) {
		return Revision{}, fmt.Errorf("invalid revision %q: want [<name>@]sha1:<commit>", s)
	}
	if (algo == "sha1" && len(commit) != 40) || (algo == "sha256" && len(commit) != 64) {
		return Revision{}, fmt.Errorf("invalid revision %q: wrong hash length for %s", s, algo)
	}
	return Revision{Name: name, Commit: commit}, nil
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validCommit reports whether s is a full commit hash. Abbreviated hashes
// are refused: they are ambiguous and cannot be checked without a clone.
func validCommit(s string) bool {
	return (len(s) == 40 || len(s) == 64) && isHex(s)
}

// shortName turns "refs/heads/main" into "main" and "refs/tags/v1" into
// "v1"; other names are returned as they are.
func shortName(ref string) string {
	n := plumbing.ReferenceName(ref)
	if n.IsBranch() || n.IsTag() {
		return n.Short()
	}
	return ref
}
