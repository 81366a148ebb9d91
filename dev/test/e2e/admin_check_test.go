package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestCheckControllerOutsideCluster (issue 21, item 31): against a
// controller that runs as a process with its own kubeconfig, not as the
// installed Deployment (no Deployment, no ServiceAccount, no RBAC), check
// says once what it found and skips the permission checks, instead of one
// ✗ per resource about a ServiceAccount that does not exist.
func TestCheckControllerOutsideCluster(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t)
	f.start(t)

	out, errOut, code := adminCLI(t, env.Kubeconfig, "", "check", "--controller-namespace", f.ns)
	g.Expect(code).To(Equal(1), out+errOut)
	g.Expect(out).To(ContainSubstring("✔ stacks.stackpilot.dev/v1alpha1"))
	failures := regexp.MustCompile(`(?m)^✗ .*$`).FindAllString(out, -1)
	g.Expect(failures).To(Equal([]string{
		"✗ no controller Deployment " + f.ns + "/stackpilot-controller: install Stackpilot: `stackpilot install` (or, if it is elsewhere, pass --controller-namespace)",
	}), out)
	g.Expect(out).To(ContainSubstring("⚠ no ServiceAccount " + f.ns + "/stackpilot-controller either: the controller is not installed in namespace " + f.ns +
		", so its permissions are not checked (a controller run outside the cluster acts with its kubeconfig's rights)"))
	g.Expect(out).NotTo(ContainSubstring("may not"))
	g.Expect(errOut).To(ContainSubstring("stackpilot: 1 check(s) failed"))
	// Who holds the controller's rights is said all the same.
	g.Expect(out).To(ContainSubstring("whoever may create, update or patch a Stack holds the controller's rights"))
}

// TestInstallPseudoVersionNeedsImage (issue 21, item 31): a CLI whose
// version is a Go pseudo-version (`go install ...@main`) has no controller
// image of that tag: install asks for --image instead of naming one that
// does not exist.
func TestInstallPseudoVersionNeedsImage(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	const pseudo = "v0.0.0-20261202100548-d440d69abcde"
	bin := filepath.Join(t.TempDir(), "stackpilot")
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+pseudo, "-o", bin, "./cmd/stackpilot")
	build.Dir = env.Root
	build.Env = os.Environ()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), errOut.String(), ee.ExitCode()
		}
		g.Expect(err).NotTo(HaveOccurred())
		return out.String(), errOut.String(), 0
	}
	out, errOut, code := run("install", "--export")
	g.Expect(code).To(Equal(1), out+errOut)
	g.Expect(out).To(BeEmpty(), "no manifests naming an image that does not exist")
	g.Expect(errOut).To(ContainSubstring("this stackpilot is a development build (version " + pseudo + ") with no controller image of its own: pass --image REF"))

	out, errOut, code = run("install", "--export", "--image", "registry.example/stackpilot-controller:v9.9.9")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("image: registry.example/stackpilot-controller:v9.9.9"))
	g.Expect(out).NotTo(ContainSubstring(pseudo))
}
