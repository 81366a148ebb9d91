package stack

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The Secrets a Stack's source reads are indexed through its kind, so a
// change of one reconciles the Stack.
func TestIndexReferencesSourceSecrets(t *testing.T) {
	g := NewWithT(t)
	r := &StackReconciler{Config: Config{Sources: sourceKinds(nil, nil, Config{})}}
	git := &v1alpha1.Stack{Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{
		Git: &v1alpha1.GitSource{URL: "https://h/r.git", SecretRef: &v1alpha1.LocalObjectReference{Name: "git-creds"}}}}}
	g.Expect(r.indexReferences(git)).To(ConsistOf("Secret/git-creds"))
	oci := &v1alpha1.Stack{Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{OCI: &v1alpha1.OCISource{
		URL:       "oci://r/x",
		SecretRef: &v1alpha1.LocalObjectReference{Name: "pull"},
		Verify:    &v1alpha1.OCIVerification{SecretRef: v1alpha1.LocalObjectReference{Name: "keys"}}}}}}
	g.Expect(r.indexReferences(oci)).To(ConsistOf("Secret/pull", "Secret/keys"))
	flux := &v1alpha1.Stack{Spec: v1alpha1.StackSpec{Source: v1alpha1.StackSource{SourceRef: &v1alpha1.FluxSourceReference{Kind: "GitRepository", Name: "r"}}}}
	g.Expect(r.indexReferences(flux)).To(BeEmpty())
}
