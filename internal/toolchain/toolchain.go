// Package toolchain finds the pinned tools that `make tools` builds into bin/
// (etcd, kube-apiserver, pulumi and its plugins...) and the Stackpilot source
// checkout they belong to, and says how to run Pulumi from them.
//
// Only development commands need it (the demo, tests, benchmarks): the
// controller and the installed CLI find nothing through a source checkout.
package toolchain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinEnv, when set, names the directory of the pinned tools instead of
// <checkout>/bin.
const BinEnv = "STACKPILOT_BIN"

// ClusterTools are the pinned binaries the one-node cluster of
// dev/internal/cluster runs.
var ClusterTools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"}

// modulePath is what the checkout's go.mod declares.
const modulePath = "github.com/stackpilot/stackpilot"

// ErrNoCheckout is returned when no Stackpilot source checkout encloses the
// working directory.
var ErrNoCheckout = errors.New("not inside a Stackpilot source checkout (no go.mod of " + modulePath + " above the working directory)")

// ModuleRoot finds the repository root: the nearest parent directory whose
// go.mod declares the Stackpilot module. Tests run with their package
// directory as the working directory, so this is how they find bin/ and
// config/.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoCheckout
		}
		dir = parent
	}
}

// BinDir is where `make tools` puts the pinned binaries; BinEnv overrides it.
func BinDir() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// Paths is ModuleRoot and BinDir together, for the many callers that need both.
func Paths() (root, bin string, err error) {
	if root, err = ModuleRoot(); err != nil {
		return "", "", err
	}
	if bin, err = BinDir(); err != nil {
		return "", "", err
	}
	return root, bin, nil
}

// MissingError names the tools that are not in the bin directory.
type MissingError struct {
	Dir     string
	Missing []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s missing from %s: run `make tools` first", strings.Join(e.Missing, ", "), e.Dir)
}

// Require checks that the named tools were built, and says how to build them.
func Require(bin string, names ...string) error {
	var missing []string
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return &MissingError{Dir: bin, Missing: missing}
	}
	return nil
}

// PulumiEnv is the environment that makes the pinned Pulumi CLI use the pinned
// plugins from bin/ and never reach the network: no update check, no plugin
// downloads (the language host and provider are found on PATH as ambient plugins).
func PulumiEnv(bin string) map[string]string {
	return map[string]string{
		"PATH":                     bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK":    "true",
	}
}
