package runner

import (
	"testing"

	. "github.com/onsi/gomega"
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
