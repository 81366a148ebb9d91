// Package runner holds the operation contract between the controller and the
// runner process, and the runner itself: the only code that calls Pulumi.
//
// The controller writes a Spec as JSON, an executor starts the runner with it, and
// the runner writes exactly one Result as JSON. Both carry APIVersion so that a
// controller and a runner of different builds refuse each other clearly.
package runner

import (
	"encoding/json"
	"time"

	"github.com/stackpilot/stackpilot/internal/policy"
)

// APIVersion is the version of the Spec and Result payloads.
const APIVersion = "runner.stackpilot.dev/v1alpha1"

// OperationType names what the runner does.
type OperationType string

const (
	OpPreview    OperationType = "preview"
	OpUp         OperationType = "up"
	OpRefresh    OperationType = "refresh"
	OpDestroy    OperationType = "destroy"
	OpDriftCheck OperationType = "drift-check" // a refresh preview: what differs from the real world
	// OpOutputs reads the stack's outputs, secret ones decrypted, from its
	// state: no engine run, no lock, no change. The controller uses it to
	// restore its published outputs without running an up.
	OpOutputs OperationType = "outputs"
)

// Spec is one operation, complete: the runner needs nothing else (no Kubernetes API access).
type Spec struct {
	APIVersion string        `json:"apiVersion"`
	ID         string        `json:"id"` // operation ID, also recorded in the Stack's history
	Type       OperationType `json:"type"`

	// WorkDir is the Pulumi project directory (holds Pulumi.yaml). It is a private
	// copy for this operation; the runner may write Pulumi.<stack>.yaml into it.
	WorkDir string `json:"workDir"`
	// StackName is the Pulumi stack name (for example "dev" or "org/dev").
	StackName string `json:"stackName"`
	// Backend is the state backend URL (file://, s3://, postgres://, https://...).
	Backend string `json:"backend"`
	// PulumiHome is shared between operations so plugins are installed once.
	PulumiHome string `json:"pulumiHome,omitempty"`
	// PulumiCommand is the pulumi binary to run; empty means "pulumi" from PATH.
	// Its folder is put first on the CLI's PATH, so the plugins installed
	// beside it (for example in /usr/local/bin or <repo>/bin) are found first.
	PulumiCommand string `json:"pulumiCommand,omitempty"`
	// SecretsProvider is used when the runner creates the stack (for example
	// "awskms://..."); empty means the backend's default (a passphrase for DIY
	// backends, from PULUMI_CONFIG_PASSPHRASE in Env). Existing stacks keep theirs.
	SecretsProvider string `json:"secretsProvider,omitempty"`

	// Config values by key. A key without a namespace ("replicas") is put in the
	// project's namespace ("<project>:replicas"). Value is any JSON value.
	Config []ConfigValue `json:"config,omitempty"`
	// Env is added to the Pulumi process environment (secrets provider passphrase,
	// backend credentials, provider credentials). Never logged.
	Env map[string]string `json:"env,omitempty"`
	// ToolEnv is added to the Pulumi process environment after Env: where
	// the runner Pod put the program's dependencies (deps.go: GOMODCACHE,
	// POETRY_VIRTUALENVS_IN_PROJECT, ...), so that the language host uses
	// them and installs nothing. It holds no secret (it is not scrubbed
	// from logs as Env is) and never travels: only the Pod sets it.
	ToolEnv map[string]string `json:"-"`

	Refresh bool `json:"refresh,omitempty"` // refresh before up/preview
	// Plan is the path of a Pulumi update plan file. A preview with Plan set
	// saves its plan there (`pulumi preview --save-plan`); an up with Plan set
	// applies exactly that plan (`pulumi up --plan`): an up that would do
	// anything the plan does not hold fails with ErrorPlanInvalid, having
	// applied nothing beyond it. The path must be absolute; a preview removes
	// an earlier file there first (a failed preview leaves none) and creates
	// its folder; a missing file fails an up with ErrorPlanInvalid. Give the up
	// the same Config, Refresh, Targets and IgnoreChanges as its preview: they
	// shape the steps the plan is checked against. Secret values in the file
	// are encrypted with the stack's secrets provider. Ignored for other
	// operation types.
	Plan    string   `json:"plan,omitempty"`
	Targets []string `json:"targets,omitempty"` // URNs to limit the operation to

	// IgnoreChanges maps URNs to Pulumi property paths ("data.key",
	// `metadata.annotations["x/y"]`) an up or preview must leave as they are in
	// the world (drift that is meant to happen). In a Pulumi YAML program they
	// are added to the resources' options.ignoreChanges in the work dir's copy;
	// a URN that cannot be handled so (another runtime, a resource the YAML does
	// not declare literally) is left out of the run (`--exclude`) and listed in
	// Result.Excluded. Ignored for other operation types.
	IgnoreChanges map[string][]string `json:"ignoreChanges,omitempty"`

	// Claim is who owns the Pulumi stack, "<namespace>/<name>" of the Stack. When
	// set, the runner reads the stack tag stackpilot:owner before anything else
	// touches the stack (config, locks, the engine): absent, it is set to Claim;
	// different, the operation ends with OutcomeConflict, ErrorClaimed and
	// Result.ClaimedBy, having changed nothing.
	Claim string `json:"claim,omitempty"`
	// ClaimHeld says that an earlier operation of the same Stack applied this
	// very stack, so it took the claim then. It no longer spares the check:
	// the tag is read at every operation (claimStack says why).
	ClaimHeld bool `json:"claimHeld,omitempty"`

	// Review marks the preview of a pull request (spec.previews): it must
	// change nothing in the backend. The runner then creates no stack (a
	// stack with no state yet is previewed as an empty stack in a scratch
	// file:// backend inside the work dir; on another backend the preview
	// fails, saying so), takes no claim (one held by another Stack still
	// refuses it), clears no lock and repairs no state. Only a preview may
	// set it.
	Review bool `json:"review,omitempty"`

	// RemoveStack, on a destroy, removes the stack from its backend once
	// its resources are destroyed (`pulumi stack rm`): its state, history
	// and tags go too. A pull request's review stack ends so.
	RemoveStack bool `json:"removeStack,omitempty"`

	// StaleLock asks the runner to remove the lock an earlier operation of this
	// controller left behind when it died (interrupted, or killed at its
	// timeout). Only a lock proven to be that operation's and dead is removed;
	// any other lock fails the operation with ErrorLocked, naming it.
	StaleLock *StaleLock `json:"staleLock,omitempty"`

	// LogFile, when set, is where the runner writes Pulumi's human output of
	// the engine run as it runs (what `pulumi up` prints, without colour),
	// every value of Env and every secret config value replaced by
	// "[secret]", any ANSI code removed, bounded (enginelog.go). The file is
	// created or truncated; its folder is created.
	LogFile string `json:"logFile,omitempty"`

	// ProgressFile, when set, is where the runner keeps the change counts so
	// far while the engine runs (JSON, Progress): replaced atomically, at most
	// every second, only when they changed. The controller shows them live in
	// status.currentOperation.changes. Its folder must exist.
	ProgressFile string `json:"progressFile,omitempty"`

	// Policy, when it holds a rule, is enforced inside the engine of an up
	// or a preview (Pulumi has no policy hook elsewhere): the runner hands
	// the CLI its own binary as a policy analyzer (internal/policy/analyzer)
	// with these rules and each resource's inputs as the stack's state has
	// them. A mandatory violation stops the operation before the resource's
	// step: OutcomeFailed, ErrorPolicy, the findings in Result.Policy.
	Policy *PolicySpec `json:"policy,omitempty"`

	// PolicyPacks are Pulumi policy packs the engine of an up or a preview
	// runs (`--policy-pack`, spec.policyPacks), in order. Before anything
	// starts, each pack's runtime must have its language host where the CLI
	// finds plugins (PATH, or beside the pulumi binary): else ErrorPolicyPack,
	// nothing ran. Other operations ignore them.
	PolicyPacks []PolicyPack `json:"policyPacks,omitempty"`

	// Timeout bounds the whole operation; zero means none (the executor also enforces it).
	Timeout Duration `json:"timeout,omitempty"`
}

// PolicyPack is one Pulumi policy pack of an operation.
type PolicyPack struct {
	// Name is the pack's name in spec.policyPacks, for messages.
	Name string `json:"name"`
	// Dir is the folder holding its PulumiPolicy.yaml: absolute, or, in a
	// Job's spec, relative to the tree as WorkDir is.
	Dir string `json:"dir"`
	// Config is the pack's --policy-pack-config document (JSON); empty for
	// none.
	Config json.RawMessage `json:"config,omitempty"`
}

// PolicySpec is what the analyzer enforces for one operation.
type PolicySpec struct {
	// Stack is what rules see as `stack`.
	Stack policy.Stack `json:"stack"`
	// Policies that select the Stack, compiled by the controller before.
	Policies []policy.Policy `json:"policies"`
}

// PolicyFinding is one policy rule's verdict on one resource, as Pulumi
// reported it: a violation, or a rule that could not decide.
type PolicyFinding struct {
	// Policy is <kind>/<policy>/<rule>: StackPolicy/<namespace>/<name>/<rule>
	// or ClusterStackPolicy/<name>/<rule>.
	Policy string `json:"policy"`
	// Enforcement is mandatory (the operation stopped) or advisory.
	Enforcement string `json:"enforcement"`
	URN         string `json:"urn,omitempty"`
	// Message says what is wrong, secrets masked.
	Message string `json:"message"`
}

// StaleLock describes the operation whose lock may be left behind. A lock of a
// DIY backend (JSON: pid, username, hostname, timestamp, written by the pulumi
// CLI: a file of a file:// backend, a row of a postgres:// one, an object of
// an s3:// bucket; see lockstore.go) is removed only when all of these hold:
//   - its hostname is Host;
//   - its timestamp is not before NotBefore (the lock was taken by that operation
//     or a later one of the same host, never by an older run);
//   - its process is provably dead: on the runner's own host, the pid is not
//     running, or runs but started after the lock was written (the pid was
//     reused); on another host, HostGone is set.
//
// The runner reads and removes those locks itself, with the backend's
// credentials from Env: file://, postgres://, s3://, gs:// and azblob://.
// Pulumi Cloud gets no automatic clearing: its in-progress updates are the
// service's.
type StaleLock struct {
	// Host is the host name the dead operation ran on (its controller's
	// os.Hostname(); in a Pod, the Pod name).
	Host string `json:"host"`
	// NotBefore is when the dead operation started (the first of several dead
	// in a row on Host: one killed before it cleared its predecessor's lock
	// leaves that lock too).
	NotBefore time.Time `json:"notBefore"`
	// HostGone says that Host no longer exists: the controller checked through
	// the API that no Pod of that name is left in its namespace.
	HostGone bool `json:"hostGone,omitempty"`
}

// ConfigValue is one Pulumi config entry.
type ConfigValue struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`  // string, number, bool, object or array
	Secret bool   `json:"secret"` // stored encrypted; shown as "[secret]" everywhere
}

// Outcome is how an operation ended.
type Outcome string

const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeConflict  Outcome = "conflict" // another update holds the stack lock, or another Stack claims the stack
	OutcomeCancelled Outcome = "cancelled"
)

// ErrorClass says who has to act on a failure.
type ErrorClass string

const (
	ErrorNone     ErrorClass = ""
	ErrorProgram  ErrorClass = "program"  // the Pulumi program or its config is wrong
	ErrorAuth     ErrorClass = "auth"     // credentials refused (backend or provider)
	ErrorBackend  ErrorClass = "backend"  // the state backend is unreachable or broken
	ErrorLocked   ErrorClass = "locked"   // the stack is locked by another update
	ErrorClaimed  ErrorClass = "claimed"  // the stack belongs to another Stack (stack tag stackpilot:owner)
	ErrorTimeout  ErrorClass = "timeout"  // the operation ran past its timeout
	ErrorInternal ErrorClass = "internal" // a bug or an environment problem in Stackpilot
	// ErrorRunnerPod: the Job executor's Pod could not run the operation
	// (its image could not be pulled, it was never scheduled, a quota
	// refused it); nothing ran.
	ErrorRunnerPod ErrorClass = "runner-pod"
	// ErrorPlanInvalid: an up with Spec.Plan would have done something its plan
	// does not hold (the world or an input the program reads changed since the
	// preview); make a new plan.
	ErrorPlanInvalid ErrorClass = "plan"
	// ErrorPolicy: a mandatory policy rule refused a resource (Spec.Policy);
	// nothing of that resource changed. Result.Policy has the findings.
	ErrorPolicy ErrorClass = "policy"
	// ErrorPolicyInvalid: a policy that selects the Stack does not compile,
	// so the controller started no runner (it sets this class itself).
	ErrorPolicyInvalid ErrorClass = "policy-invalid"
	// ErrorPolicyPack: a policy pack of Spec.PolicyPacks cannot run here (no
	// PulumiPolicy.yaml, or no language host for its runtime in the
	// runner's image); nothing ran.
	ErrorPolicyPack ErrorClass = "policy-pack"
)

// Result is what the runner writes when an operation ends, whatever the outcome.
type Result struct {
	APIVersion string        `json:"apiVersion"`
	ID         string        `json:"id"`
	Type       OperationType `json:"type"`
	Outcome    Outcome       `json:"outcome"`
	ErrorClass ErrorClass    `json:"errorClass,omitempty"`
	// Message is a short human summary; for program errors it carries Pulumi's own
	// diagnostic lines (error-severity diagnostics from the engine events).
	Message string `json:"message,omitempty"`

	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`

	Changes   ChangeCounts      `json:"changes"`
	Resources []ResourceChange  `json:"resources,omitempty"` // only resources with a change
	Outputs   map[string]Output `json:"outputs,omitempty"`   // stack outputs after up

	// ClearedLocks counts the stale locks removed at Spec.StaleLock's request.
	ClearedLocks int `json:"clearedLocks,omitempty"`
	// Repairs says, one sentence each, what the runner repaired in a file://
	// backend's state before the operation: an empty sidecar or a stale
	// temporary file a killed write left (tornstate.go). Never a checkpoint;
	// the controller records them in the history and an event.
	Repairs []string `json:"repairs,omitempty"`
	// ClaimedBy is the owner found in the stack tag when it is not Spec.Claim
	// (ErrorClaimed).
	ClaimedBy string `json:"claimedBy,omitempty"`
	// PulumiProcesses counts the pulumi CLI processes the operation started
	// (1 in the steady state; 2 when it created the stack).
	PulumiProcesses int `json:"pulumiProcesses,omitempty"`
	// Excluded are the URNs of Spec.IgnoreChanges the run left out entirely
	// (`--exclude`) because their paths could not be ignored one by one; sorted.
	Excluded []string `json:"excluded,omitempty"`
	// Policy lists what Spec.Policy's rules found, mandatory first, at most
	// maxPolicyFindings.
	Policy []PolicyFinding `json:"policy,omitempty"`
	// DependencyCache says how a Job operation's Pod got the program's
	// dependencies (deps.go): DepCacheHit (restored from the cache of the
	// Stack's namespace, no package manager ran), DepCacheMiss (installed,
	// then offered to the cache), or "" (none to install: a YAML program,
	// no lockfile, dependencies already in the tree, or the Local executor).
	DependencyCache string `json:"dependencyCache,omitempty"`
}

// ChangeCounts counts resources by the step the engine took.
type ChangeCounts struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	Same    int `json:"same"`
}

// ResourceChange is one resource the engine changed, or would change.
type ResourceChange struct {
	URN  string `json:"urn"`
	Type string `json:"type"`
	// Op is the engine's step: create, update, replace, delete, refresh (drift), ...
	Op string `json:"op"`
	// Properties names the changed top-level properties (names only, never values).
	Properties []string `json:"properties,omitempty"`
	// Paths are the changed property paths in Pulumi's syntax ("data.key",
	// `metadata.annotations["x/y"]`), sorted: the keys of the engine's detailed
	// diff, or the top-level names when it sent none. Paths only, never values.
	Paths []string `json:"paths,omitempty"`
}

// Output is one stack output. Secret values are carried so the controller can write
// them to the outputs Secret; everything user-visible shows "[secret]" instead.
type Output struct {
	Value  any  `json:"value"`
	Secret bool `json:"secret"`
}

// Duration is a time.Duration that marshals as a Go duration string ("30m").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" || s == `""` {
		*d = 0
		return nil
	}
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return &time.ParseError{Layout: "duration", Value: s, Message: ": want a quoted duration like \"30m\""}
	}
	v, err := time.ParseDuration(s[1 : len(s)-1])
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
