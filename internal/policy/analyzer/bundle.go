// Package analyzer is the policy analyzer Pulumi runs inside its engine:
// given to `pulumi up` or `pulumi preview` as `--policy-pack <executable>`,
// it is started as a binary analyzer plugin, and the engine asks it about
// every resource the program registers, after the provider checked the
// inputs and before the resource's step. A mandatory violation stops the
// update before that resource changes.
//
// The executable is the runner's own binary under the name AnalyzerName (a
// symbolic link; see Link): the engine starts it with arguments of its own
// choosing, so the name is what says "be the analyzer". What to enforce
// comes in a Bundle, a JSON file named by the environment variable
// BundleEnv, which the engine passes on from the CLI's environment.
package analyzer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stackpilot/stackpilot/internal/policy"
)

const (
	// AnalyzerName is the executable name that makes the binary the
	// analyzer.
	AnalyzerName = "stackpilot-policy-analyzer"
	// BundleEnv names the environment variable with the Bundle's path.
	BundleEnv = "STACKPILOT_POLICY_BUNDLE"
	// PackName is the policy pack's name in Pulumi's output and event log.
	PackName = "stackpilot"
	// PackVersion is the pack's version there.
	PackVersion = "1.0.0"
)

// Bundle is everything the analyzer enforces for one operation.
type Bundle struct {
	// Stack is what rules see as `stack`.
	Stack policy.Stack `json:"stack"`
	// Policies apply to the Stack, in the order findings list them.
	Policies []policy.Policy `json:"policies"`
	// Prior holds each resource's inputs as the last operation left them,
	// by URN, in Pulumi's state form with secrets in plaintext (so that a
	// rule's message masks them; policy.DecodeInputs reads them): the
	// engine does not tell an analyzer whether a resource is created or
	// updated, nor what it was. A URN missing from Prior is a
	// create. Prior is nil when the state is unknown (no operation type
	// then: only rules that match every operation apply).
	Prior map[string]map[string]any `json:"prior"`
	// Ops holds each resource's operation from the update plan the engine
	// runs with (`pulumi up --plan`), by URN, when there is one: only a plan
	// tells a replace from an update. Without it the operation comes from
	// Prior.
	Ops map[string]string `json:"ops,omitempty"`
}

// WriteBundle writes b into dir as JSON readable by its owner only (rules
// may hold literal values worth keeping private, and Prior holds inputs),
// and returns the path.
func WriteBundle(dir string, b Bundle) (string, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("policy bundle: %w", err)
	}
	path := filepath.Join(dir, "policy-bundle.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("policy bundle: %w", err)
	}
	return path, nil
}

// ReadBundle reads the Bundle BundleEnv names.
func ReadBundle() (Bundle, error) {
	var b Bundle
	path := os.Getenv(BundleEnv)
	if path == "" {
		return b, fmt.Errorf("%s is not set: the analyzer runs only as the runner sets it up", BundleEnv)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return b, fmt.Errorf("policy bundle: %w", err)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("policy bundle %s: %w", path, err)
	}
	return b, nil
}

// Link makes the analyzer executable in dir: a symbolic link named
// AnalyzerName to binary (the runner's own executable), and returns its
// absolute path, for `--policy-pack`. Pulumi starts a pack given as a file,
// not a directory, as a binary plugin; it looks for a PulumiPolicy.yaml
// beside it, so dir holds nothing else.
func Link(dir, binary string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(dir, AnalyzerName))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Symlink(binary, abs); err != nil {
		return "", fmt.Errorf("policy analyzer: %w", err)
	}
	return abs, nil
}

// Invoked says whether this process was started as the analyzer.
func Invoked() bool { return filepath.Base(os.Args[0]) == AnalyzerName }
