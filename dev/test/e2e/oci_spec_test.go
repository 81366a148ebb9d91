package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The API server refuses a malformed spec.source.oci with a message saying
// what to fix, and accepts the sample.
func TestOCISpecValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	digest := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	base := func(mutate func(*v1alpha1.Stack)) *v1alpha1.Stack {
		s := &v1alpha1.Stack{}
		s.Name, s.Namespace = "v", ns
		s.Spec.Source.OCI = &v1alpha1.OCISource{URL: "oci://registry.example:5000/infra/app"}
		mutate(s)
		return s
	}
	for name, tc := range map[string]struct {
		mutate func(*v1alpha1.Stack)
		msg    string
	}{
		"tag in url":    {func(s *v1alpha1.Stack) { s.Spec.Source.OCI.URL = "oci://registry.example/infra/app:v1" }, "without a tag or digest"},
		"digest in url": {func(s *v1alpha1.Stack) { s.Spec.Source.OCI.URL = "oci://registry.example/infra/app@" + digest }, "without a tag or digest"},
		"not oci":       {func(s *v1alpha1.Stack) { s.Spec.Source.OCI.URL = "https://registry.example/infra/app" }, "must be oci://"},
		"two refs":      {func(s *v1alpha1.Stack) { s.Spec.Source.OCI.Ref = &v1alpha1.OCIRef{Tag: "v1", Digest: digest} }, "at most one of tag, semver or digest"},
		"short digest":  {func(s *v1alpha1.Stack) { s.Spec.Source.OCI.Ref = &v1alpha1.OCIRef{Digest: "sha256:abc"} }, "spec.source.oci.ref.digest"},
		"git and oci":   {func(s *v1alpha1.Stack) { s.Spec.Source.Git = &v1alpha1.GitSource{URL: "https://git.example/x"} }, "exactly one source kind"},
		"unknown verify": {func(s *v1alpha1.Stack) {
			s.Spec.Source.OCI.Verify = &v1alpha1.OCIVerification{Provider: "notation", SecretRef: v1alpha1.LocalObjectReference{Name: "k"}}
		}, "spec.source.oci.verify.provider"},
		"no layer type":    {func(s *v1alpha1.Stack) { s.Spec.Source.OCI.LayerSelector = &v1alpha1.OCILayerSelector{} }, "spec.source.oci.layerSelector.mediaType"},
		"no source at all": {func(s *v1alpha1.Stack) { s.Spec.Source.OCI = nil }, "exactly one source kind"},
	} {
		err := env.Client.Create(ctx, base(tc.mutate), client.DryRunAll)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		NewWithT(t).Expect(err.Error()).To(ContainSubstring(tc.msg), name)
	}
	for _, ok := range []func(*v1alpha1.Stack){
		func(s *v1alpha1.Stack) {},
		func(s *v1alpha1.Stack) { s.Spec.Source.OCI.Ref = &v1alpha1.OCIRef{SemVer: ">=1.0.0"} },
		func(s *v1alpha1.Stack) { s.Spec.Source.OCI.Ref = &v1alpha1.OCIRef{Digest: digest} },
		func(s *v1alpha1.Stack) { s.Spec.Source.OCI.URL = "oci://127.0.0.1:5000/a/b/c" },
	} {
		NewWithT(t).Expect(env.Client.Create(ctx, base(ok), client.DryRunAll)).To(Succeed())
	}

	raw, err := os.ReadFile(filepath.Join(env.Root, "config", "samples", "stack-oci.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	sample := &v1alpha1.Stack{}
	NewWithT(t).Expect(yaml.Unmarshal(raw, sample)).To(Succeed())
	sample.Namespace = ns
	NewWithT(t).Expect(env.Client.Create(ctx, sample, client.DryRunAll)).To(Succeed())
}
