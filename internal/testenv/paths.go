package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModuleRoot finds the repository root: the nearest parent directory whose go.mod
// declares the Stackpilot module. Tests run with their package directory as the
// working directory, so this is how they find bin/ and config/.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/stackpilot/stackpilot\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no go.mod of github.com/stackpilot/stackpilot above the working directory")
		}
		dir = parent
	}
}

// BinDir is where `make tools` puts the pinned binaries; STACKPILOT_BIN overrides it.
func BinDir() (string, error) {
	if dir := os.Getenv("STACKPILOT_BIN"); dir != "" {
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

// RequireBinaries checks that the named tools were built, and says how to build them.
func RequireBinaries(bin string, names ...string) error {
	var missing []string
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testenv: %s missing from %s: run `make tools` first", strings.Join(missing, ", "), bin)
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
