package git

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/serror"
	"github.com/stackpilot/stackpilot/internal/source"
)

// A Git revision over a bound stalls for that revision, naming the flag
// that sets the bound; other fetch errors keep their source's meaning.
func TestGitFetchErrorNamesTheFlag(t *testing.T) {
	g := NewWithT(t)
	const rev = "main@sha1:0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		err  error
		flag string
	}{
		{&LimitError{URL: "https://git.example/infra", Revision: rev, What: "size of the fetched objects", Max: 10}, "--artifact-max-size"},
		{&LimitError{URL: "https://git.example/infra", Revision: rev, What: "file count", Max: 10}, "--artifact-max-files"},
		{fmt.Errorf("storing %s: %w", rev, &artifact.LimitError{Limit: "file count", Max: 10, Of: "tree"}), "--artifact-max-files"},
		{fmt.Errorf("storing %s: %w", rev, &artifact.LimitError{Limit: "size", Max: 10, Of: "tree"}), "--artifact-max-size"},
	} {
		err := fetchError(c.err, rev)
		var se *serror.StallingError
		g.Expect(errors.As(err, &se)).To(BeTrue(), "%v", err)
		g.Expect(se.Reason).To(Equal(v1alpha1.ArtifactFailedReason))
		g.Expect(se.Revision).To(Equal(rev))
		g.Expect(err.Error()).To(ContainSubstring(c.flag))
		g.Expect(err.Error()).To(ContainSubstring("nothing of it was applied"))
	}
	err := fetchError(&source.AuthError{URL: "https://git.example/infra", Reason: "refused"}, rev)
	var te *serror.TransientError
	g.Expect(errors.As(err, &te)).To(BeTrue(), "%v", err)
	g.Expect(te.Reason).To(Equal(v1alpha1.AuthenticationFailedReason))
}
