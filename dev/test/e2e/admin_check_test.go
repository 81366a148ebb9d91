package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestControllerRefusesBadExecutorFlags (issue 23, item 1): a wrong
// --default-executor, --max-concurrent-jobs or --runner-endpoint stops the
// controller at start with a message naming the flag and what it takes; and
// --default-executor=Job outside a Pod needs --runner-image.
func TestControllerRefusesBadExecutorFlags(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	for args, want := range map[string]string{
		"--default-executor=job":                       `--default-executor="job": want Local (operations run as processes of the controller) or Job (one Pod per operation in the Stack's namespace)`,
		"--max-concurrent-jobs=0":                      "--max-concurrent-jobs must be at least 1",
		"--runner-endpoint=http://stackpilot-runner:1": `--runner-endpoint="http://stackpilot-runner:1": want an https URL`,
		"--default-executor=Job":                       "--default-executor=Job needs --runner-image: the controller does not run in a Pod",
	} {
		// A controller that wrongly starts is stopped, and fails the test.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, controllerBinary(t), "--kubeconfig", env.Kubeconfig, "--data-dir", t.TempDir(), "--metrics-bind-address=0",
			"--health-probe-bind-address=127.0.0.1:0", "--webhook-bind-address=0", "--logs-bind-address=0", args)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "POD_NAME=") || strings.HasPrefix(kv, "POD_NAMESPACE=")
		})
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		g.Expect(errors.As(err, &ee)).To(BeTrue(), "%s: the controller started: %v\n%s", args, err, out)
		g.Expect(ee.ExitCode()).To(Equal(1), args)
		g.Expect(string(out)).To(ContainSubstring("stackpilot-controller: "+want), args)
	}
}
