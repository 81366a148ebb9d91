package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// TestRunYAMLErrorInResourceIsProgramError: Pulumi YAML reports an undefined
// variable inside a resource on the language host's stderr ("info#err"), not as
// an error diagnostic; it is still a program error carrying Pulumi's words.
func TestRunYAMLErrorInResourceIsProgramError(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, `name: broken
runtime: yaml
resources:
  bag:
    type: pulumi:providers:kubernetes
    properties:
      namespace: ${doesNotExist}
`)
	res := e.run(e.spec(OpUp))
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorProgram), res.Message)
	g.Expect(res.Message).To(ContainSubstring("doesNotExist"))
}

// TestRunFailureMessageLeadsWithTheError: with an explicit Kubernetes
// provider, which Pulumi finds on $PATH beside the CLI, the message starts
// with the program's problem, not with Pulumi's "using ... from $PATH"
// warning (twice, from the language host).
func TestRunFailureMessageLeadsWithTheError(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, configMapProgram)
	if err := testenv.RequireBinaries(e.bin, "pulumi-resource-kubernetes"); err != nil {
		t.Fatal(err)
	}
	kube := kubeEnv(t)
	spec := e.spec(OpUp, ConfigValue{Key: "namespace", Value: "no-such-namespace-here"},
		ConfigValue{Key: "kubeconfig", Value: kube.Kubeconfig}, ConfigValue{Key: "greeting", Value: "x"})
	spec.LogFile = filepath.Join(t.TempDir(), "op.log")
	res := e.run(spec)
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorProgram))
	first, _, _ := strings.Cut(res.Message, "\n")
	g.Expect(first).To(ContainSubstring("no-such-namespace-here"), "the first line: %q", res.Message)
	g.Expect(res.Message).NotTo(ContainSubstring("from $PATH"))
	// The engine log keeps everything Pulumi said.
	log, err := os.ReadFile(spec.LogFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(log)).To(ContainSubstring("no-such-namespace-here"))
}
