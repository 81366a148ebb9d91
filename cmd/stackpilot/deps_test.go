package main

import (
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// testScaffolding are packages made for tests and development. The CLI users
// install must link none of them: they pull in envtest's asset lookups and a
// Git server that shells out to git, they are not built to run outside a
// test, and the dev module (dev/: the one-node cluster with its kubelet
// launcher and image builder, the controller process, the demo, the
// benchmarks) is not the product's. The harness packages that stay in the
// product module for its white-box tests (control plane, daemon, pki, Git
// server, tool finder) are listed too: the CLI has no use for them.
var testScaffolding = regexp.MustCompile(`^github\.com/stackpilot/stackpilot/(dev|internal/testenv|internal/controlplane|internal/daemon|internal/pki|internal/gitserver|internal/toolchain)(/|$)|/gittestserver(/|$)|^sigs\.k8s\.io/controller-runtime/pkg/envtest(/|$)`)

// testingImporters are the third-party packages allowed to import the
// standard testing package: they ship test helpers in non-test files
// (digitorus/pkcs7's verify_test_dsa.go, sigstore's pkg/tuf/testutils.go),
// linked through cosign for `artifact sign|verify`. Linking testing is
// harmless since Go 1.13 (its flags register in testing.Init, which only a
// test binary calls), but nothing of ours may import it.
var testingImporters = map[string]bool{
	"github.com/digitorus/pkcs7":           true,
	"github.com/sigstore/sigstore/pkg/tuf": true,
}

// TestLinksNoTestScaffolding lists what `go build ./cmd/stackpilot` links.
func TestLinksNoTestScaffolding(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if testScaffolding.MatchString(pkg) {
			found = append(found, pkg)
		}
		for _, imp := range imports {
			if imp == "testing" && !testingImporters[pkg] {
				found = append(found, "testing (imported by "+pkg+")")
			}
		}
	}
	sort.Strings(found)
	if len(found) > 0 {
		t.Errorf("cmd/stackpilot links test scaffolding or the dev module: %s\nmove what it needs out of them into a product package", strings.Join(found, ", "))
	}
}
