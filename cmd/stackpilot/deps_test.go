package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// testScaffolding are packages made for tests. The CLI users install must
// link none of them: they pull in testing's flags, envtest's asset lookups
// and a Git server that shells out to git, and they are not built to run
// outside a test.
var testScaffolding = regexp.MustCompile(`^testing$|^github\.com/stackpilot/stackpilot/internal/testenv(/|$)|/gittestserver(/|$)|^sigs\.k8s\.io/controller-runtime/pkg/envtest(/|$)`)

// TestLinksNoTestScaffolding lists what `go build ./cmd/stackpilot` links.
func TestLinksNoTestScaffolding(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var found []string
	for _, pkg := range strings.Fields(string(out)) {
		if testScaffolding.MatchString(pkg) {
			found = append(found, pkg)
		}
	}
	if len(found) > 0 {
		t.Errorf("cmd/stackpilot links test scaffolding: %s\nmove what it needs out of them (see internal/controlplane, internal/gitserver, internal/controllerproc, internal/toolchain)", strings.Join(found, ", "))
	}
}
