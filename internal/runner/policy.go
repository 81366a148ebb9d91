package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"

	"github.com/stackpilot/stackpilot/internal/policy/analyzer"
)

// maxPolicyFindings bounds Result.Policy: a program of thousands of
// resources breaking one rule must not make the result unbounded.
const maxPolicyFindings = 100

// enforcesPolicy says whether the operation runs the policy analyzer: an up
// or a preview (Pulumi takes --policy-pack there only) with a rule to apply.
func (o *operation) enforcesPolicy() bool {
	if o.spec.Policy == nil || (o.spec.Type != OpUp && o.spec.Type != OpPreview) {
		return false
	}
	for _, p := range o.spec.Policy.Policies {
		if len(p.Rules) > 0 {
			return true
		}
	}
	return false
}

// policyPack prepares the analyzer for the engine run: the bundle (the
// rules, the Stack, each resource's inputs as the state has them, so that
// the analyzer knows a create from an update) in a private folder, and this
// binary linked there under the analyzer's name. It returns the CLI's
// arguments and adds the bundle's path to the CLI's environment; cleanup
// removes the folder.
func (o *operation) policyPack(ctx context.Context) (args []string, cleanup func(), err error) {
	cleanup = func() {}
	if !o.enforcesPolicy() {
		return nil, cleanup, nil
	}
	dir, err := os.MkdirTemp("", "stackpilot-policy-")
	if err != nil {
		return nil, cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	prior, err := o.priorInputs(ctx)
	if err != nil {
		return nil, cleanup, fmt.Errorf("policy: the stack's resources as they are: %w", err)
	}
	bundle, err := analyzer.WriteBundle(dir, analyzer.Bundle{Stack: o.spec.Policy.Stack, Policies: o.spec.Policy.Policies, Prior: prior})
	if err != nil {
		return nil, cleanup, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, cleanup, fmt.Errorf("policy: the runner's own binary: %w", err)
	}
	link, err := analyzer.Link(filepath.Join(dir, "pack"), self)
	if err != nil {
		return nil, cleanup, err
	}
	o.cli.env = append(o.cli.env, analyzer.BundleEnv+"="+bundle)
	return []string{"--policy-pack", link}, cleanup, nil
}

// priorInputs are the inputs of the stack's resources by URN, secrets
// revealed (the analyzer compares them with what the program declares):
// read from a file:// backend's checkpoint, else through `pulumi stack
// export --show-secrets` (one process more, only when a policy applies).
// A stack with no state yet has none.
func (o *operation) priorInputs(ctx context.Context) (map[string]map[string]any, error) {
	var d *deployment
	switch {
	case o.file != nil && !o.file.exists():
		return map[string]map[string]any{}, nil
	case o.file != nil:
		read, err := o.file.readCheckpoint()
		if err != nil {
			return nil, err
		}
		d = read
	default:
		out, err := o.cli.run(ctx, nil, nil, "stack", "export", "--stack", o.spec.StackName, "--show-secrets")
		if isStackNotFound(err) {
			return map[string]map[string]any{}, nil
		}
		if err != nil {
			return nil, err
		}
		if d, err = parseExport(out); err != nil {
			return nil, err
		}
	}
	if d == nil {
		return map[string]map[string]any{}, nil
	}
	// A checkpoint's secrets are ciphertext: the crypter is made at the
	// first one (an export's are plaintext).
	var crypt *passphraseCrypter
	reveal := func(v any) (any, error) {
		plain, _, err := revealSecrets(v, crypt)
		if errors.Is(err, errNeedsCrypter) && crypt == nil && o.file != nil {
			if crypt, err = o.stateCrypter(d); err != nil {
				return nil, err
			}
			plain, _, err = revealSecrets(v, crypt)
		}
		return plain, err
	}
	prior := make(map[string]map[string]any, len(d.Resources))
	for _, r := range d.Resources {
		inputs := make(map[string]any, len(r.Inputs))
		for k, raw := range r.Inputs {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("%s input %q: %w", r.URN, k, err)
			}
			plain, err := reveal(v)
			if err != nil {
				return nil, fmt.Errorf("%s input %q: %w", r.URN, k, err)
			}
			inputs[k] = plain
		}
		prior[r.URN] = inputs
	}
	return prior, nil
}

// policyEvent records one of the engine's policy events.
func (c *eventCollector) policyEvent(e apitype.PolicyEvent) {
	if len(c.policy) >= maxPolicyFindings {
		return
	}
	c.policy = append(c.policy, PolicyFinding{Policy: e.PolicyName, Enforcement: e.EnforcementLevel,
		URN: e.ResourceURN, Message: strings.TrimSpace(e.Message)})
}

// policyFindings are the findings, mandatory first, then as the engine
// reported them.
func (c *eventCollector) policyFindings() []PolicyFinding {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]PolicyFinding(nil), c.policy...)
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Enforcement == "mandatory" && out[j].Enforcement != "mandatory"
	})
	return out
}

// policyViolation is Result.Message for ErrorPolicy: each mandatory
// finding, with its resource, policy rule and message.
func policyViolation(findings []PolicyFinding) (string, bool) {
	var lines []string
	for _, f := range findings {
		if f.Enforcement == "mandatory" {
			lines = append(lines, fmt.Sprintf("%s: %s: %s", f.URN, f.Policy, f.Message))
		}
	}
	if len(lines) == 0 {
		return "", false
	}
	return "PolicyViolation: " + strings.Join(lines, "; "), true
}
