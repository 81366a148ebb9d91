package stack

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func TestSafeBackendURL(t *testing.T) {
	g := NewWithT(t)
	g.Expect(safeBackendURL("postgres://app:s3cret@db:5432/state?sslmode=disable&password=p4ss")).
		To(Equal("postgres://db:5432/state?sslmode=disable"))
	g.Expect(safeBackendURL("azblob://c?storage_account=a&sig=abc&sv=1")).NotTo(ContainSubstring("abc"))
	g.Expect(safeBackendURL("file:///data/state/team-a")).To(Equal("file:///data/state/team-a"))
	g.Expect(safeBackendURL("s3://bucket/prefix?region=eu-west-1")).To(Equal("s3://bucket/prefix?region=eu-west-1"))
}

func TestStackChanged(t *testing.T) {
	g := NewWithT(t)
	stack := stackFixture()
	in := &inputs{Backend: "file:///data/state/infra"}
	g.Expect(stackChanged(stack, in)).To(Succeed(), "never applied: anything goes")

	stack.Status.AppliedStack = currentStack(stack, in)
	g.Expect(stackChanged(stack, in)).To(Succeed())
	g.Expect(stackChanged(stack, &inputs{Backend: "file://u:other-password@/data/state/infra"})).To(Succeed(),
		"credentials in the URL are not part of the stack's identity")

	err := stackChanged(stack, &inputs{Backend: "s3://bucket/infra"})
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.StackChangedReason))
	g.Expect(err.Error()).To(ContainSubstring("pulumi stack export"))

	stack.Spec.StackName = "renamed"
	err = stackChanged(stack, in)
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.StackChangedReason))
	g.Expect(err.Error()).To(ContainSubstring("stack renamed"))
}

func TestClaimedErrorNamesTheOwner(t *testing.T) {
	g := NewWithT(t)
	err := claimedError(stackFixture(), &inputs{Backend: "postgres://u:pw-123@db/x"}, "infra/first")
	g.Expect(reasonOf(err, "")).To(Equal(v1alpha1.StackClaimedReason))
	g.Expect(err.Error()).To(ContainSubstring("belongs to Stack infra/first"))
	g.Expect(err.Error()).To(ContainSubstring("spec.stackName"))
	g.Expect(err.Error()).NotTo(ContainSubstring("pw-123"))
}
