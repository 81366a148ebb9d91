package runner

import (
	"regexp"
	"strings"
)

// Update plans (Spec.Plan): what a person approved is what runs.
//
// A preview with Spec.Plan writes Pulumi's update plan to that file
// (`pulumi preview --save-plan`); an up with Spec.Plan gives the same file to
// the engine (`pulumi up --plan`), which checks each step against it before
// taking it: a create, update, replace or delete the plan does not hold, or
// inputs other than the planned ones, fail that resource, and it is not
// touched. The up then ends with ErrorPlanInvalid and Pulumi's reasons.
//
// The pinned CLI (v3.276) lists `up --plan` only with PULUMI_EXPERIMENTAL set,
// but parses and honours the hidden flag without it; the runner does not set
// the variable, because it also switches on the engine's other experiments
// (and makes every up generate a plan of its own). `--skip-preview` stays: the
// engine constrains the update to the given plan, no new preview is needed.
// Secret values never reach the plan file (no --show-secrets: they are
// encrypted with the stack's secrets provider) nor the engine's violation
// text (redacted as "[secret]").

// planArgs are the CLI arguments that save or apply Spec.Plan.
func planArgs(spec Spec) []string {
	if spec.Plan == "" {
		return nil
	}
	switch spec.Type {
	case OpPreview:
		return []string{"--save-plan", spec.Plan}
	case OpUp:
		return []string{"--plan", spec.Plan}
	}
	return nil
}

// planInvalidPrefix starts the Message of an ErrorPlanInvalid result.
const planInvalidPrefix = "the plan is no longer valid: "

// planViolationPattern matches the engine's reasons for refusing a step of an
// up with a plan (pkg/resource/deploy in Pulumi v3.276):
//   - "resource <urn> violates plan: properties changed: ~~data[...]" (and
//     "... violates plan: resource unexpectedly not deleted", provider,
//     parent, dependencies... changed), from the step generator;
//   - "resource violates plan: ..." when outputs differ, from the executor;
//   - "<op> is not allowed by the plan: no steps were expected for this
//     resource" (or "this resource is constrained to <op>");
//   - "expected resource operations for <urn> but none were seen".
var planViolationPattern = regexp.MustCompile(`violates plan: |is not allowed by the plan: |` +
	`expected resource operations for \S+ but none were seen`)

// planViolations are the lines of text that say why the plan did not hold.
func planViolations(lines []string) []string {
	var out []string
	for _, l := range lines {
		if planViolationPattern.MatchString(l) {
			out = append(out, strings.TrimPrefix(strings.TrimSpace(l), "error: "))
		}
	}
	return dedupe(out)
}

// planFailure returns the engine's plan violations of a failed operation, if
// it failed because of them.
func planFailure(f failure) []string {
	if v := planViolations(f.diags); len(v) > 0 {
		return v
	}
	return planViolations(cleanLines(f.stderr))
}
