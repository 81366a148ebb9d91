package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// touched. The up then ends with ErrorPlanInvalid, its Message
// "the plan is no longer valid: " and Pulumi's reasons. A plan goes invalid
// when anything the program reads changes after the preview (another stack's
// outputs, a config value, the world found by a refresh: drift after a plan
// that changed nothing makes the up's repair a step no plan holds), never
// because of time alone.
//
// Measured with the pinned CLI (v3.276), YAML host and Kubernetes provider
// (plan_e2e_test.go): the CLI lists `up --plan` only with PULUMI_EXPERIMENTAL
// set, but parses and honours the hidden flag without it. The runner does not
// set the variable: it would switch on the engine's other experiments too,
// and make every up generate a plan of its own. `--skip-preview` stays (the
// engine checks against the given plan, it needs no preview of its own), and
// so does `--refresh` (refresh steps are not checked, the update steps after
// them are). Secret values reach neither the plan file (without
// --show-secrets they are encrypted with the stack's secrets provider) nor
// the engine's reasons (shown as "[secret]").

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

// PlanFileError says that the plan an up is to apply cannot be read: it is
// gone (a data dir lost with its Pod) or is not a file. Nothing ran; a new
// preview makes a new plan.
type PlanFileError struct {
	Path string
	Err  error
}

func (e *PlanFileError) Error() string {
	return fmt.Sprintf("the plan file %s cannot be read (%v); run a new preview to make a new plan", e.Path, e.Err)
}

func (e *PlanFileError) Unwrap() error { return e.Err }

// preparePlanFile runs before any process starts. For an up it makes sure the
// plan is there: without it the CLI would fail with a bare "no such file".
// For a preview it removes the plan an earlier preview left at the path, so
// that a preview that fails leaves no plan behind to be applied (Pulumi
// writes the file only when the preview succeeds), and creates the folder.
func preparePlanFile(spec Spec) error {
	if spec.Plan == "" {
		return nil
	}
	switch spec.Type {
	case OpUp:
		fi, err := os.Stat(spec.Plan)
		if err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			return &PlanFileError{Path: spec.Plan, Err: unwrapPathError(err)}
		}
	case OpPreview:
		if err := os.MkdirAll(filepath.Dir(spec.Plan), 0o700); err != nil {
			return fmt.Errorf("the folder of the plan file: %w", err)
		}
		for _, f := range []string{spec.Plan, PlanInputsFile(spec.Plan)} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the earlier plan: %w", err)
			}
		}
	}
	return nil
}

// unwrapPathError drops the path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}
