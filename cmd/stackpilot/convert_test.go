package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const convertInput = `apiVersion: pulumi.com/v1
kind: Program
metadata: {name: page, namespace: infra}
program:
  resources: {cm: {type: "kubernetes:core/v1:ConfigMap"}}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: web, namespace: infra}
spec:
  stack: dev
  programRef: {name: page}
  workspaceTemplate: {spec: {image: x}}
`

func convertCLI(stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errOut strings.Builder
	code = runWithInput(append([]string{"convert"}, args...), strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestConvertCommand(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	stdout, stderr, code := convertCLI(convertInput, "-f", "-", "--program-dir", dir, "--program-url", "https://git.example/org/p.git")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(ContainSubstring("kind: Stack\n"))
	g.Expect(stdout).To(ContainSubstring("url: https://git.example/org/p.git"))
	g.Expect(stderr).To(ContainSubstring("warning: Stack infra/web: spec.workspaceTemplate: pods are configured on the controller"))
	g.Expect(strings.Count(stderr, "warning:")).To(Equal(1), stderr)
	yml, err := os.ReadFile(filepath.Join(dir, "page", "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(yml)).To(HavePrefix("name: page\nruntime: yaml\n"))

	// Again: the same file is fine; a different one is never overwritten.
	_, stderr, code = convertCLI(convertInput, "-f", "-", "--program-dir", dir)
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(os.WriteFile(filepath.Join(dir, "page", "Pulumi.yaml"), []byte("name: mine\n"), 0o644)).To(Succeed())
	stdout, stderr, code = convertCLI(convertInput, "-f", "-", "--program-dir", dir)
	g.Expect(code).To(Equal(1))
	g.Expect(stdout).To(BeEmpty())
	g.Expect(stderr).To(ContainSubstring("exists and differs"))
}

func TestConvertCommandErrors(t *testing.T) {
	g := NewWithT(t)
	_, stderr, code := convertCLI(convertInput, "-f", "-")
	g.Expect(code).To(Equal(2))
	g.Expect(stderr).To(ContainSubstring("pass --program-dir DIR"))

	_, stderr, code = convertCLI("")
	g.Expect(code).To(Equal(2))
	g.Expect(stderr).To(ContainSubstring(`"file" not set`))

	_, stderr, code = convertCLI("", "-f", filepath.Join(t.TempDir(), "missing.yaml"))
	g.Expect(code).To(Equal(1))
	g.Expect(stderr).To(ContainSubstring("-f takes a YAML file"))

	_, stderr, code = convertCLI("kind: Stack\n", "-f", "-")
	g.Expect(code).To(Equal(1))
	g.Expect(stderr).To(ContainSubstring("stackpilot: stdin: document 1 has no apiVersion or kind"))
}
