package source

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

func TestErrorMessages(t *testing.T) {
	g := NewWithT(t)
	cause := errors.New("cause")
	for _, tc := range []struct {
		err      error
		want     string
		stalling bool
	}{
		{&AuthError{URL: "https://h/r.git", Key: "known_hosts", Reason: "is required for SSH"}, `invalid credentials for https://h/r.git: secret key "known_hosts": is required for SSH`, true},
		{&AuthError{Key: "identity", Reason: "cannot be parsed"}, `invalid credentials: secret key "identity": cannot be parsed`, true},
		{&AuthError{URL: "https://h/r.git", Reason: "refused", Err: cause}, "authentication to https://h/r.git failed: refused", false},
		{&NotFoundError{URL: "https://h/r.git", Ref: "branch main"}, "branch main not found in https://h/r.git", false},
		{&NotFoundError{URL: "https://h/r.git", Reason: "gone"}, "repository https://h/r.git not found: gone", false},
		{&TransientError{URL: "https://h/r.git", Op: "clone", Reason: "server answered 503"}, "clone https://h/r.git: server answered 503", false},
		{&InvalidSpecError{Field: "ref.semver", Value: "x", Reason: "bad"}, `invalid ref.semver "x": bad`, true},
	} {
		g.Expect(tc.err.Error()).To(Equal(tc.want))
		wrapped := fmt.Errorf("resolve: %w", tc.err)
		g.Expect(IsStalling(wrapped)).To(Equal(tc.stalling), tc.want)
	}
	g.Expect(errors.Is(&AuthError{Err: cause}, cause)).To(BeTrue())
}

func TestRedact(t *testing.T) {
	g := NewWithT(t)
	g.Expect(RedactURL("https://alice:pw@h/r.git")).To(Equal("https://h/r.git"))
	g.Expect(RedactURL("https://token@h/r.git")).To(Equal("https://h/r.git"))
	g.Expect(RedactURL("ssh://git@h/r.git")).To(Equal("ssh://git@h/r.git"))
	g.Expect(RedactURL("ssh://git:pw@h/r.git")).To(Equal("ssh://h/r.git"))
	g.Expect(RedactURL("git@h:org/r.git")).To(Equal("git@h:org/r.git"))
	g.Expect(RedactURL("user:pw@h:org/r.git")).To(Equal("h:org/r.git"))
	g.Expect(Redact("auth failed for hunter22 at hunter22", "hunter22", "")).To(Equal("auth failed for *** at ***"))
}
