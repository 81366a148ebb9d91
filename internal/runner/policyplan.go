package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/stackpilot/stackpilot/internal/policy"
)

// Rules for replaces and deletes. Pulumi's engine never asks an analyzer
// about a delete, and asks about a resource before the provider's Diff, so
// it cannot say a replace (internal/policy, plan.go). When a rule lists
// either (policy.NeedsPlan), the runner works from an update plan:
//
//   - an up makes one first (`pulumi preview --save-plan`, the same program,
//     config, refresh and targets: one engine run more, only for these
//     Stacks), or takes the approved one (Spec.Plan); refuses before the
//     engine runs when a mandatory rule for deletes is violated; and runs
//     with `--plan`, so the engine takes no step the plan does not hold, and
//     the analyzer, given each resource's planned operation, checks creates,
//     updates and replaces as they happen, with every input known;
//   - a preview saves its plan (to Spec.Plan, or a file of its own) and,
//     once the engine ran, evaluates the rules that list replace or delete
//     on it; a mandatory violation fails the preview and removes the plan,
//     so that nothing refused waits for approval;
//   - a destroy deletes every resource of the state: the rules for deletes
//     are evaluated on the state before the engine runs.

// planFileName is the plan the runner makes, in the policy folder.
const planFileName = "plan.json"

// planPolicy runs before the engine: what an up, a preview or a destroy
// needs for rules over replaces and deletes. It returns the CLI's extra
// arguments.
func (o *operation) planPolicy(ctx context.Context, pr *policyRun, human *engineLog) ([]string, error) {
	if !pr.needsPlan {
		return nil, nil
	}
	switch o.spec.Type {
	case OpDestroy:
		var deletes []policy.Resource
		for urn, raw := range pr.prior {
			typ, name := policy.SplitURN(urn)
			inputs, err := policy.DecodeInputs(raw, nil)
			if err != nil {
				return nil, fmt.Errorf("policy: %s: %w", urn, err)
			}
			deletes = append(deletes, policy.Resource{URN: urn, Type: typ, Name: name, Op: string(policy.Delete),
				Inputs: map[string]any{}, OldInputs: inputs})
		}
		sort.Slice(deletes, func(i, j int) bool { return deletes[i].URN < deletes[j].URN })
		return nil, o.checkChanges(ctx, pr, deletes, false, policy.Delete)
	case OpPreview:
		if o.spec.Plan != "" {
			return nil, nil
		}
		return []string{"--save-plan", filepath.Join(pr.dir, planFileName)}, nil
	case OpUp:
		path, args := o.spec.Plan, []string(nil)
		if path == "" {
			path = filepath.Join(pr.dir, planFileName)
			if err := o.savePlan(ctx, pr, path, human); err != nil {
				return nil, err
			}
			args = []string{"--plan", path}
		}
		changes, err := o.readPlan(path, pr)
		if err != nil {
			return nil, err
		}
		pr.ops = map[string]string{}
		for _, c := range changes {
			pr.ops[c.URN] = c.Op
		}
		return args, o.checkChanges(ctx, pr, changes, false, policy.Delete)
	}
	return nil, nil
}

// savePlan runs the preview that makes an up's plan: the up's own
// arguments as a preview's, without the analyzer (the up runs it).
func (o *operation) savePlan(ctx context.Context, pr *policyRun, path string, human *engineLog) error {
	preview := *o
	preview.spec.Type = OpPreview
	preview.spec.Plan = path
	args := preview.engineArgs(filepath.Join(pr.dir, "plan-events.jsonl"))
	return o.withStack(ctx, func() error {
		_, err := o.cli.runTo(ctx, nil, human.stdout(), human.stderrTee(o.stderr), args...)
		return err
	})
}

// readPlan reads an update plan's changes; secrets the plan holds
// encrypted are opened with the stack's passphrase where the runner has it.
func (o *operation) readPlan(path string, pr *policyRun) ([]policy.Resource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &PlanFileError{Path: path, Err: unwrapPathError(err)}
	}
	changes, err := policy.PlanChanges(data, pr.prior, o.planDecrypter())
	if err != nil {
		return nil, fmt.Errorf("policy: the update plan: %w", err)
	}
	return changes, nil
}

// planDecrypter opens the plan's secrets with the stack's passphrase
// crypter, when the runner can make one (a file:// backend); elsewhere a
// secret input of a replace reads as unknown to a rule.
func (o *operation) planDecrypter() policy.Decrypter {
	if o.file == nil || !o.file.exists() {
		return nil
	}
	return func(ciphertext string) (string, error) {
		d, err := o.file.readCheckpoint()
		if err != nil {
			return "", err
		}
		crypt, err := o.stateCrypter(d)
		if err != nil {
			return "", err
		}
		return crypt.decrypt(ciphertext)
	}
}

// checkPreviewPlan runs after a preview's engine: the rules that list
// replace or delete, on the plan it saved. The analyzer took a replaced
// resource for an update; its findings there from rules that list update
// and not replace are dropped, so that a preview reports what the up
// would.
func (o *operation) checkPreviewPlan(ctx context.Context, pr *policyRun) error {
	if pr == nil || !pr.needsPlan || o.spec.Type != OpPreview {
		return nil
	}
	path := o.spec.Plan
	if path == "" {
		path = filepath.Join(pr.dir, planFileName)
	}
	changes, err := o.readPlan(path, pr)
	if err != nil {
		return err
	}
	replaced := map[string]bool{}
	for _, c := range changes {
		if c.Op == string(policy.Replace) {
			replaced[c.URN] = true
		}
	}
	rules := map[string]policy.Rule{}
	for _, c := range pr.compiled {
		for _, r := range c.Policy.Rules {
			rules[c.Policy.RuleName(r.Name)] = r
		}
	}
	o.events.dropPolicy(func(f PolicyFinding) bool {
		r, ok := rules[f.Policy]
		return ok && replaced[f.URN] && !r.ListsOperation(policy.Replace)
	})
	err = o.checkChanges(ctx, pr, changes, true, policy.Replace, policy.Delete)
	if err != nil && o.spec.Plan != "" {
		// Nothing refused may wait for approval.
		_ = os.Remove(o.spec.Plan)
	}
	return err
}

// checkChanges evaluates, on each change whose operation is one of ops, the
// rules that list that operation, and records what they find. A mandatory
// violation returns errPolicyRefused. dryRun: a preview, where a rule that
// cannot be decided yet does not block.
func (o *operation) checkChanges(ctx context.Context, pr *policyRun, changes []policy.Resource, dryRun bool, ops ...policy.Operation) error {
	refused := false
	for _, c := range changes {
		if !containsOperation(ops, c.Op) {
			continue
		}
		for _, compiled := range pr.compiled {
			for _, f := range compiled.EvaluateListed(ctx, o.spec.Policy.Stack, c) {
				level := f.Level(dryRun)
				refused = refused || level == policy.Mandatory
				o.events.addPolicy(PolicyFinding{Policy: compiled.Policy.RuleName(f.Rule),
					Enforcement: string(level), URN: f.URN, Message: f.Text()})
			}
		}
	}
	if refused {
		return errPolicyRefused
	}
	return nil
}

func containsOperation(ops []policy.Operation, op string) bool {
	for _, o := range ops {
		if string(o) == op {
			return true
		}
	}
	return false
}
