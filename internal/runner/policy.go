package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"

	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/policy/analyzer"
)

// maxPolicyFindings bounds Result.Policy: a program of thousands of
// resources breaking one rule must not make the result unbounded.
const maxPolicyFindings = 100

// enforcesPolicy says whether the operation applies policy rules: an up or
// a preview (the engine's analyzer, and a plan's replaces and deletes), or
// a destroy (its deletes), with a rule to apply.
func (o *operation) enforcesPolicy() bool {
	switch {
	case o.spec.Policy == nil:
		return false
	case o.spec.Type == OpDestroy:
		// Only rules for deletes apply to a destroy.
		return policy.NeedsPlan(o.spec.Policy.Policies)
	case o.spec.Type != OpUp && o.spec.Type != OpPreview:
		return false
	}
	for _, p := range o.spec.Policy.Policies {
		if len(p.Rules) > 0 {
			return true
		}
	}
	return false
}

// policyRun is one operation's policy enforcement: its private folder (the
// bundle, the analyzer's link, the update plan the runner makes), the
// stack's resources as they are, and the compiled rules.
type policyRun struct {
	dir      string
	prior    map[string]map[string]any
	compiled []*policy.Compiled
	// needsPlan: a rule lists replace or delete (policy.NeedsPlan).
	needsPlan bool
	// ops are the operations of the update plan the engine runs with, by
	// URN, for the analyzer; nil without a plan.
	ops map[string]string
}

// errPolicyRefused ends an operation whose plan a mandatory rule refused
// before the engine ran (or, for a preview, after): the findings are in
// the event collector, and Run reports ErrorPolicy.
var errPolicyRefused = errors.New("a mandatory policy rule refused the change")

// policyPack prepares the analyzer for the engine run: the bundle (the
// rules, the Stack, each resource's inputs as the state has them, so that
// the analyzer knows a create from an update, and the plan's operations)
// in a private folder, and this binary linked there under the analyzer's
// name. Before an up or a destroy it applies the rules for replaces and
// deletes (policyplan.go); a mandatory violation there returns
// errPolicyRefused and the engine does not run. It returns the CLI's extra
// arguments (none for a destroy, which takes no policy pack) and adds the
// bundle's path to the CLI's environment; cleanup removes the folder.
func (o *operation) policyPack(ctx context.Context, human *engineLog) (pr *policyRun, args []string, cleanup func(), err error) {
	cleanup = func() {}
	if !o.enforcesPolicy() {
		return nil, nil, cleanup, nil
	}
	dir, err := os.MkdirTemp("", "stackpilot-policy-")
	if err != nil {
		return nil, nil, cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	pr = &policyRun{dir: dir, needsPlan: policy.NeedsPlan(o.spec.Policy.Policies)}
	for _, p := range o.spec.Policy.Policies {
		c, err := policy.Compile(p)
		if err != nil {
			return nil, nil, cleanup, err
		}
		pr.compiled = append(pr.compiled, c)
	}
	if pr.prior, err = o.priorInputs(ctx); err != nil {
		return nil, nil, cleanup, fmt.Errorf("policy: the stack's resources as they are: %w", err)
	}
	if args, err = o.planPolicy(ctx, pr, human); err != nil {
		return nil, nil, cleanup, err
	}
	if o.spec.Type == OpDestroy {
		return pr, args, cleanup, nil
	}
	bundle, err := analyzer.WriteBundle(dir, analyzer.Bundle{Stack: o.spec.Policy.Stack, Policies: o.spec.Policy.Policies, Prior: pr.prior, Ops: pr.ops})
	if err != nil {
		return nil, nil, cleanup, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, cleanup, fmt.Errorf("policy: the runner's own binary: %w", err)
	}
	link, err := analyzer.Link(filepath.Join(dir, "pack"), self)
	if err != nil {
		return nil, nil, cleanup, err
	}
	o.cli.env = append(o.cli.env, analyzer.BundleEnv+"="+bundle)
	return pr, append(args, "--policy-pack", link), cleanup, nil
}

// priorInputs are the inputs of the stack's resources by URN, in Pulumi's
// state form with each secret in plaintext (the analyzer compares them with
// what the program declares; policy.DecodeState reads them):
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
	// first one (an export's are plaintext). They stay marked as secrets,
	// in plaintext, so that a rule's message shows "[secret]" for them as
	// for the new inputs.
	var crypt *passphraseCrypter
	open := func(v any) (any, error) {
		plain, err := plaintextSecrets(v, crypt)
		if errors.Is(err, errNeedsCrypter) && crypt == nil && o.file != nil {
			if crypt, err = o.stateCrypter(d); err != nil {
				return nil, err
			}
			plain, err = plaintextSecrets(v, crypt)
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
			plain, err := open(v)
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
	c.addPolicyLocked(PolicyFinding{Policy: e.PolicyName, Enforcement: e.EnforcementLevel,
		URN: e.ResourceURN, Message: strings.TrimSpace(e.Message)})
}

// addPolicy records a finding of the runner's own (a plan's replaces and
// deletes).
func (c *eventCollector) addPolicy(f PolicyFinding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addPolicyLocked(f)
}

func (c *eventCollector) addPolicyLocked(f PolicyFinding) {
	if len(c.policy) < maxPolicyFindings {
		c.policy = append(c.policy, f)
	}
}

// dropPolicy removes the findings drop selects.
func (c *eventCollector) dropPolicy(drop func(PolicyFinding) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.policy = slices.DeleteFunc(c.policy, drop)
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

// plaintextSecrets is v with each secret in Pulumi's plaintext form
// ({sig: secret, "plaintext": JSON}), ciphertext decrypted.
func plaintextSecrets(v any, crypt *passphraseCrypter) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if t[secretSigKey] == secretSigValue {
			text, err := secretText(t, crypt)
			if err != nil {
				return nil, err
			}
			return map[string]any{secretSigKey: secretSigValue, "plaintext": text}, nil
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			p, err := plaintextSecrets(e, crypt)
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			p, err := plaintextSecrets(e, crypt)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	}
	return v, nil
}
