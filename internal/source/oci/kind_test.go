package oci

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/artifact"
	ocilib "github.com/stackpilot/stackpilot/internal/oci"
	"github.com/stackpilot/stackpilot/internal/serror"
	"github.com/stackpilot/stackpilot/internal/source"
)

// What is wrong with an artifact itself stalls the Stack for that revision
// (a new push can fix it); a bad signature, a tampered download and registry
// failures are retried, each with its own reason.
func TestOCIFetchErrorClasses(t *testing.T) {
	const rev = "v1@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	for _, tc := range []struct {
		err     error
		reason  string
		stalled bool
	}{
		{&VerificationError{Ref: "oci://r/x:" + rev, Err: errors.New("no signature")}, v1alpha1.VerificationFailedReason, false},
		{fmt.Errorf("artifact: %w", &ocilib.LimitError{Layer: "sha256:1", Size: 10, Max: 5}), v1alpha1.ArtifactFailedReason, true},
		{&artifact.UnsafePathError{Path: "../x", Reason: "climbs out"}, v1alpha1.ArtifactFailedReason, true},
		{&ocilib.DigestError{Layer: "sha256:1", Got: "sha256:2"}, v1alpha1.ArtifactFailedReason, false},
		{&source.AuthError{URL: "oci://r/x", Reason: "refused"}, v1alpha1.AuthenticationFailedReason, false},
		{&source.NotFoundError{URL: "oci://r/x", Ref: "digest sha256:1"}, v1alpha1.SourceNotFoundReason, false},
		{errors.New("connection reset"), v1alpha1.OCIOperationFailedReason, false},
	} {
		g := NewWithT(t)
		got := fetchError(tc.err, rev)
		g.Expect(serror.ReasonOf(got, "")).To(Equal(tc.reason), "%v", tc.err)
		var stall *serror.StallingError
		g.Expect(errors.As(got, &stall)).To(Equal(tc.stalled), "%v", tc.err)
		if tc.stalled {
			g.Expect(stall.Revision).To(Equal(rev), "stalled for the revision alone")
		}
	}
}
