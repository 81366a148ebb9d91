package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"
)

// readFileState lets the runner read and write a file:// backend's state files
// itself. Tests turn it off to run the CLI-only path other backends take.
var readFileState = true

// operation is the state of one Run.
type operation struct {
	spec    Spec
	events  *eventCollector
	stderr  *tailBuffer // the CLI's stderr during the engine run
	cli     *pulumiCLI
	project string
	// file is the stack's state in a file:// backend, read and written
	// directly; nil for other backends, which only the CLI can reach.
	file *fileStack
	// crypt is the stack's passphrase crypter, when the runner can make one
	// (file:// backend or a salt in the stack file, and a passphrase).
	crypt *passphraseCrypter
	// created is set once this operation created the stack.
	created bool
	// excluded are the URNs the engine run leaves out (Spec.IgnoreChanges).
	excluded []string
	// scratch is the backend folder a review made for a stack with no
	// state yet (review.go); removed when the operation ends.
	scratch string
}

func (o *operation) run(ctx context.Context, res *Result) error {
	spec := o.spec
	if err := validate(spec); err != nil {
		return stepErr(phaseSpec, err)
	}
	if err := preparePlanFile(spec); err != nil {
		return stepErr(phaseOperation, err)
	}
	project, err := ProjectName(spec.WorkDir)
	if err != nil {
		return stepErr(phaseProject, err)
	}
	o.project = project
	if err := o.ignoreChanges(res); err != nil {
		return stepErr(phaseProject, err)
	}
	config, err := prepareConfig(project, spec.Config)
	if err != nil {
		return stepErr(phaseProject, err)
	}
	if spec.Review {
		// Before the CLI is made: it may preview another backend.
		if err := o.reviewBackend(); err != nil {
			return stepErr(phaseStack, err)
		}
		spec = o.spec
	} else if err := prepareBackend(spec.Backend); err != nil {
		return stepErr(phaseStack, err)
	}
	if o.cli, err = newPulumiCLI(spec); err != nil {
		return stepErr(phaseCommand, err)
	}
	if err := o.checkPolicyPacks(); err != nil {
		return stepErr(phaseProject, err)
	}
	if dir, ok := fileBackendDir(spec.Backend); ok && readFileState {
		fs := openFileStack(dir, project, spec.StackName)
		o.file = &fs
		// Before anything reads the state (tornstate.go); a review
		// repairs nothing.
		if !spec.Review {
			repairs, err := fs.repairSidecars()
			res.Repairs = append(res.Repairs, repairs...)
			if err != nil {
				return stepErr(phaseStack, err)
			}
		}
	}
	if spec.Type == OpOutputs {
		// Reading must not create a stack, nor needs the config.
		return o.readOutputs(ctx, res)
	}
	if err := o.ensureStack(ctx); err != nil {
		return stepErr(phaseStack, err)
	}
	// The claim comes first: a stack of another Stack is neither configured,
	// unlocked nor run.
	if err := o.claim(ctx, res); err != nil {
		return err
	}
	if err := o.applyConfig(ctx, config); err != nil {
		return stepErr(phaseConfig, err)
	}
	n, err := clearStaleLock(ctx, spec, project)
	res.ClearedLocks = n
	if err != nil {
		return stepErr(phaseLock, err)
	}
	if dir, ok := fileBackendDir(spec.Backend); ok && o.file != nil && !spec.Review {
		// Once a dead operation's lock is gone, its temporary files are too.
		res.Repairs = append(res.Repairs, o.file.removeStaleTemps(fileLocks(dir, project, spec.StackName), time.Now())...)
	}
	return o.execute(ctx, res)
}

// ignoreChanges applies Spec.IgnoreChanges to an up or preview, before
// anything else runs: the program in the work dir is final from here on.
func (o *operation) ignoreChanges(res *Result) error {
	if o.spec.Type != OpUp && o.spec.Type != OpPreview {
		return nil
	}
	excluded, err := applyIgnoreChanges(o.spec.WorkDir, o.spec.IgnoreChanges)
	if err != nil {
		return err
	}
	o.excluded = excluded
	res.Excluded = excluded
	return nil
}

// ensureStack creates the stack when it does not exist yet: the one extra CLI
// start of a stack's first apply. A file:// backend is looked at directly;
// for other backends the runner cannot know without asking the CLI, so it does
// not ask: the first call that finds no stack creates it and runs again
// (withStack).
func (o *operation) ensureStack(ctx context.Context) error {
	if o.file == nil || o.file.exists() {
		return nil
	}
	return o.createStack(ctx)
}

func (o *operation) createStack(ctx context.Context) error {
	if o.spec.Review {
		return errReviewNoStack
	}
	args := []string{"stack", "init", o.spec.StackName, "--no-select"}
	if o.spec.SecretsProvider != "" {
		args = append(args, "--secrets-provider", o.spec.SecretsProvider)
	}
	_, err := o.cli.run(ctx, nil, nil, args...)
	if isStackExists(err) {
		return nil // created since we looked: the race is harmless
	}
	if err == nil {
		o.created = true
	}
	return err
}

// withStack runs call; when it fails because the stack does not exist (a
// backend the runner cannot look into), the stack is created and call runs again.
func (o *operation) withStack(ctx context.Context, call func() error) error {
	err := call()
	if !isStackNotFound(err) || o.created || o.spec.Type == OpOutputs {
		return err
	}
	if err := o.createStack(ctx); err != nil {
		return fmt.Errorf("create the stack: %w", err)
	}
	return call()
}

// claim checks (and, when free, takes) the stack's ownership for spec.Claim,
// at every operation, on every backend: on a backend reached only through
// the CLI, two Stacks that claim a fresh stack at once can both pass the
// first claim (claimStack), and the loser only learns of it by reading the
// tag again, so a held claim is read again too (one `pulumi stack tag ls`
// per operation).
func (o *operation) claim(ctx context.Context, res *Result) error {
	if o.spec.Claim == "" {
		return nil
	}
	owner, err := claimStack(o.tagStore(ctx), o.spec)
	if _, ok := errors.AsType[*ClaimedError](err); ok {
		res.ClaimedBy = owner
	}
	return stepErr(phaseClaim, err)
}

// tagStore reads and writes the stack's tags: the file of a file:// backend,
// else the CLI.
func (o *operation) tagStore(ctx context.Context) tagStore {
	if o.file != nil {
		return o.file
	}
	return cliTags{o: o, ctx: ctx}
}

// workspaceEnv is the environment of every CLI call. Spec.Backend and
// Spec.PulumiHome win over Spec.Env: the controller chose them for this stack.
func workspaceEnv(spec Spec) map[string]string {
	env := map[string]string{
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		// The work dir is fresh for every operation, so the stack file has no
		// encryption salt after the first run: take the secrets manager from the
		// stack's state instead of creating a new one.
		"PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
		// Recorded with each update, as Pulumi's Automation API records it:
		// the runner drives the CLI for a program, not a person at a terminal.
		"PULUMI_AUTOMATION_API": "true",
		// The CLI offers --event-log only with this set (Pulumi's Automation API
		// sets it for the same reason).
		"PULUMI_DEBUG_COMMANDS": "true",
	}
	maps.Copy(env, spec.Env)
	maps.Copy(env, spec.ToolEnv) // where the Pod put the dependencies wins: it installed them there
	// --yes is passed wherever it is needed; the variable would add it to
	// `refresh --preview-only` (drift-check), which refuses it.
	env["PULUMI_SKIP_CONFIRMATIONS"] = "false"
	env["PULUMI_BACKEND_URL"] = spec.Backend
	if spec.PulumiHome != "" {
		env["PULUMI_HOME"] = spec.PulumiHome
	}
	return env
}

// execute runs the engine for the operation type: one CLI process, its events
// in a log file read as it grows when Spec.ProgressFile asks for live
// counts, else once afterwards.
func (o *operation) execute(ctx context.Context, res *Result) error {
	log, err := newEventLog()
	if err != nil {
		return stepErr(phaseOperation, err)
	}
	defer log.remove()
	human, err := openEngineLog(o.spec)
	if err != nil {
		return stepErr(phaseOperation, err)
	}
	defer human.close()
	args := o.engineArgs(log.path())
	pr, pack, cleanup, err := o.policyPack(ctx, human)
	defer cleanup()
	if err != nil {
		return stepErr(phaseOperation, err)
	}
	if o.policyPacksApply() {
		dir, err := os.MkdirTemp("", "stackpilot-packs-")
		if err != nil {
			return stepErr(phaseOperation, err)
		}
		defer os.RemoveAll(dir)
		if pack, err = o.policyPackArgs(pack, dir); err != nil {
			return stepErr(phaseOperation, err)
		}
	}
	args = append(args, pack...)
	var stackOutputs map[string]any
	err = o.withStack(ctx, func() error {
		// Each call reads the log from its start, as the CLI writes it anew.
		tail := log.tail()
		progress := startProgress(o.spec.ID, o.spec.ProgressFile, tail, o.events)
		_, err := o.cli.runTo(ctx, nil, human.stdout(), human.stderrTee(o.stderr), args...)
		progress.finish()
		stackOutputs = tail.outputs
		return err
	})
	if err != nil {
		return stepErr(phaseOperation, err)
	}
	if err := o.checkPreviewPlan(ctx, pr); err != nil {
		return stepErr(phaseOperation, err)
	}
	o.savePlanInputs(ctx, pr, human)
	if o.spec.Type == OpDestroy && o.spec.RemoveStack {
		// Nothing is left in it: the stack itself goes, with its history
		// and tags (a review stack, spec.previews.reviewStacks).
		if _, err := o.cli.run(ctx, nil, nil, "stack", "rm", o.spec.StackName, "--yes"); err != nil {
			return stepErr(phaseOperation, fmt.Errorf("remove the stack after its destroy: %w", err))
		}
	}
	if o.spec.Type != OpUp {
		return nil
	}
	outs, err := o.upOutputs(ctx, stackOutputs)
	if err != nil {
		return stepErr(phaseOutputs, err)
	}
	res.Outputs = outs
	return nil
}

// engineArgs are the CLI arguments of the operation's engine run.
func (o *operation) engineArgs(eventLog string) []string {
	spec := o.spec
	var args []string
	switch spec.Type {
	case OpUp:
		args = []string{"up", "--yes", "--skip-preview"}
	case OpPreview:
		args = []string{"preview"}
	case OpRefresh:
		args = []string{"refresh", "--yes", "--skip-preview"}
	case OpDriftCheck:
		// `pulumi refresh --preview-only`: what differs, without writing state.
		args = []string{"refresh", "--preview-only"}
	case OpDestroy:
		args = []string{"destroy", "--yes", "--skip-preview"}
	}
	args = append(args, "--stack", spec.StackName, "--event-log", eventLog,
		"--color", "never", "--suppress-progress", "--message", "stackpilot operation "+spec.ID)
	if spec.Refresh && (spec.Type == OpUp || spec.Type == OpPreview || spec.Type == OpDestroy) {
		args = append(args, "--refresh")
	}
	for _, t := range spec.Targets {
		args = append(args, "--target", t)
	}
	args = append(args, planArgs(spec)...)
	return append(args, excludeArgs(o.excluded)...)
}

// upOutputs are the stack's outputs after an up. From a file:// backend they
// are read from the checkpoint the up just wrote (no process). Elsewhere the
// event log has them, secrets masked: only when one is secret does the runner
// ask the CLI for the state (`stack export --show-secrets`, one process).
func (o *operation) upOutputs(ctx context.Context, fromEvents map[string]any) (map[string]Output, error) {
	if o.file != nil {
		return o.fileOutputs()
	}
	if outs, ok := maskedOutputs(fromEvents); ok {
		return outs, nil
	}
	return o.exportedOutputs(ctx)
}

// readOutputs is OpOutputs: the outputs of an existing stack, changing nothing.
func (o *operation) readOutputs(ctx context.Context, res *Result) error {
	if o.file != nil && !o.file.exists() {
		return stepErr(phaseStack, fmt.Errorf("no stack named '%s' found in %s", o.spec.StackName, o.spec.Backend))
	}
	if err := o.claim(ctx, res); err != nil {
		return err
	}
	var err error
	if o.file != nil {
		res.Outputs, err = o.fileOutputs()
	} else {
		res.Outputs, err = o.exportedOutputs(ctx)
	}
	return stepErr(phaseOutputs, err)
}

// fileOutputs reads the root stack's outputs from the checkpoint of a file://
// backend, decrypting secrets with the stack's passphrase crypter.
func (o *operation) fileOutputs() (map[string]Output, error) {
	d, err := o.file.readCheckpoint()
	if err != nil {
		return nil, err
	}
	var crypt *passphraseCrypter
	if d.hasCiphertext() {
		if crypt, err = o.stateCrypter(d); err != nil {
			return nil, err
		}
	}
	return d.stackOutputs(crypt)
}

// stateCrypter is the crypter of the stack's secrets as its state records them.
func (o *operation) stateCrypter(d *deployment) (*passphraseCrypter, error) {
	if o.crypt != nil {
		return o.crypt, nil
	}
	salt := d.passphraseSalt()
	if salt == "" {
		return nil, fmt.Errorf("the stack's secrets use the %q secrets provider, which this runner decrypts only through the CLI", providerType(d))
	}
	c, ok := newPassphraseCrypter(salt, o.spec.Env)
	if !ok {
		return nil, ErrNoPassphrase
	}
	o.crypt = c
	return c, nil
}

func providerType(d *deployment) string {
	if d == nil || d.SecretsProviders == nil {
		return "unknown"
	}
	return d.SecretsProviders.Type
}

// exportedOutputs reads the outputs through `pulumi stack export
// --show-secrets`: one process, secrets marked and in plaintext.
func (o *operation) exportedOutputs(ctx context.Context) (map[string]Output, error) {
	out, err := o.cli.run(ctx, nil, nil, "stack", "export", "--stack", o.spec.StackName, "--show-secrets")
	if err != nil {
		return nil, err
	}
	d, err := parseExport(out)
	if err != nil {
		return nil, err
	}
	return d.stackOutputs(nil)
}

// parseExport decodes the output of `pulumi stack export`.
func parseExport(out string) (*deployment, error) {
	var exp struct {
		Version    int         `json:"version"`
		Deployment *deployment `json:"deployment"`
	}
	if err := json.Unmarshal([]byte(out), &exp); err != nil {
		return nil, fmt.Errorf("`pulumi stack export` printed no deployment: %w", err)
	}
	return exp.Deployment, nil
}

// validate rejects specs no Pulumi run can satisfy.
func validate(spec Spec) error {
	switch {
	case spec.APIVersion != "" && spec.APIVersion != APIVersion:
		return &SpecError{Reason: fmt.Sprintf("apiVersion %q, this runner speaks %q", spec.APIVersion, APIVersion)}
	case spec.ID == "":
		return &SpecError{Reason: "id is empty"}
	case spec.WorkDir == "":
		return &SpecError{Reason: "workDir is empty"}
	case !filepath.IsAbs(spec.WorkDir):
		return &SpecError{Reason: "workDir must be absolute"}
	case spec.StackName == "":
		return &SpecError{Reason: "stackName is empty"}
	case spec.Backend == "":
		// Never fall back to whatever the environment is logged in to.
		return &SpecError{Reason: "backend is empty"}
	case spec.Review && spec.Type != OpPreview:
		return &SpecError{Reason: fmt.Sprintf("review is for a preview, not %s", spec.Type)}
	case spec.RemoveStack && spec.Type != OpDestroy:
		return &SpecError{Reason: fmt.Sprintf("removeStack is for a destroy, not %s", spec.Type)}
	case spec.Review && spec.StaleLock != nil:
		return &SpecError{Reason: "a review clears no lock: staleLock must be empty"}
	case spec.Plan != "" && !filepath.IsAbs(spec.Plan):
		// The CLI runs in the work dir, the runner does not.
		return &SpecError{Reason: "plan must be an absolute path"}
	}
	switch spec.Type {
	case OpPreview, OpUp, OpRefresh, OpDestroy, OpDriftCheck, OpOutputs:
		return nil
	default:
		return &SpecError{Reason: fmt.Sprintf("unknown operation type %q", spec.Type)}
	}
}
