package runner

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// phase is the part of an operation that failed. The same text means different
// things in different phases: a refused connection while selecting the stack is
// the backend's fault, while running the program it is the program's provider.
type phase string

const (
	phaseSpec      phase = "spec"      // the spec itself is unusable
	phaseProject   phase = "project"   // reading Pulumi.yaml, preparing config values
	phaseCommand   phase = "command"   // finding the pulumi binary
	phaseStack     phase = "stack"     // opening the backend, selecting or creating the stack
	phaseConfig    phase = "config"    // writing the stack's config
	phaseClaim     phase = "claim"     // reading or setting the stack's owner tag
	phaseLock      phase = "lock"      // clearing a stale lock
	phaseOperation phase = "operation" // the engine run itself
	phaseOutputs   phase = "outputs"   // reading stack outputs after up
)

// StepError is a failure in one phase of an operation.
type StepError struct {
	Phase string
	Err   error
}

func (e *StepError) Error() string { return e.Phase + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

func stepErr(p phase, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Phase: string(p), Err: err}
}

// SpecError says the spec cannot be run at all: a controller bug, not the user's.
type SpecError struct{ Reason string }

func (e *SpecError) Error() string { return "invalid operation spec: " + e.Reason }

// failure is everything known about a failed operation when it is classified.
type failure struct {
	err       error
	diags     []string // error diagnostics from the engine, cleaned
	stderr    string   // what the pulumi CLI wrote to stderr during the operation
	timedOut  bool
	cancelled bool
	timeout   Duration
}

var (
	authPattern = regexp.MustCompile(`(?i)\b(401|403)\b|unauthori[sz]ed|invalid credentials|` +
		`incorrect passphrase|passphrase must be set|PULUMI_CONFIG_PASSPHRASE|access ?denied|` +
		`invalidaccesskeyid|signaturedoesnotmatch|expiredtoken|is forbidden|forbidden:|` +
		`authentication failed|authentication required|invalid token|token is expired|` +
		`provide credentials`) // Kubernetes' 401: "the server has asked for the client to provide credentials"
	backendPattern = regexp.MustCompile(`(?i)checkpoint|bucket|blob|backend|no such host|` +
		`connection refused|connection reset|i/o timeout|tls:|x509:|could not reach|` +
		`failed to get stack|could not get stack|snapshot|postgres|dial tcp|EOF`)
	errorLinePattern = regexp.MustCompile(`(?m)^\s*error:\s*(.+)$`)
)

// classify decides the outcome and who has to act.
func classify(f failure) (Outcome, ErrorClass) {
	var p phase
	if se, ok := errors.AsType[*StepError](f.err); ok {
		p = phase(se.Phase)
	}
	text := strings.Join(f.diags, "\n") + "\n" + f.stderr + "\n" + errText(f.err)
	switch {
	case f.timedOut:
		return OutcomeFailed, ErrorTimeout
	case f.cancelled:
		return OutcomeCancelled, ErrorNone
	case isConcurrentUpdate(f.err):
		return OutcomeConflict, ErrorLocked
	}
	if _, ok := errors.AsType[*ClaimedError](f.err); ok {
		return OutcomeConflict, ErrorClaimed
	}
	if _, ok := errors.AsType[*LockedError](f.err); ok {
		return OutcomeConflict, ErrorLocked
	}
	if _, ok := errors.AsType[*PolicyPackError](f.err); ok {
		return OutcomeFailed, ErrorPolicyPack
	}
	if _, ok := errors.AsType[*SpecError](f.err); ok {
		return OutcomeFailed, ErrorInternal
	}
	if _, ok := errors.AsType[*ConfigError](f.err); ok {
		return OutcomeFailed, ErrorProgram
	}
	if _, ok := errors.AsType[*PlanFileError](f.err); ok {
		return OutcomeFailed, ErrorPlanInvalid
	}
	// A plan violation names values (a ConfigMap's data, an account number)
	// that must not be taken for the credentials' fault.
	if p == phaseOperation && len(planFailure(f)) > 0 {
		return OutcomeFailed, ErrorPlanInvalid
	}
	if authPattern.MatchString(text) {
		return OutcomeFailed, ErrorAuth
	}
	switch p {
	case phaseSpec, phaseCommand:
		return OutcomeFailed, ErrorInternal
	case phaseProject:
		return OutcomeFailed, ErrorProgram
	case phaseStack, phaseClaim, phaseLock, phaseOutputs:
		return OutcomeFailed, ErrorBackend
	case phaseConfig:
		if backendPattern.MatchString(text) {
			return OutcomeFailed, ErrorBackend
		}
		return OutcomeFailed, ErrorProgram
	case phaseOperation:
		// Diagnostics come from the program, its language host or a provider.
		if len(f.diags) > 0 {
			return OutcomeFailed, ErrorProgram
		}
		if backendPattern.MatchString(text) {
			return OutcomeFailed, ErrorBackend
		}
		if errorLinePattern.MatchString(f.stderr) {
			return OutcomeFailed, ErrorProgram
		}
	}
	return OutcomeFailed, ErrorInternal
}

// unwrapStep drops the phase prefix of a StepError.
func unwrapStep(err error) error {
	if se, ok := errors.AsType[*StepError](err); ok {
		return se.Err
	}
	return err
}

// errText is an error's text; for a CLIError it includes the
// CLI's stdout and stderr, which hold Pulumi's own explanation.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// maxMessage bounds Result.Message: it ends up in Stack status and events.
const maxMessage = 4096

// message is the human summary of a failure: Pulumi's own error lines when
// there are any, else the first line of the error.
func message(f failure, class ErrorClass) string {
	var lines []string
	switch {
	case f.timedOut:
		lines = append(lines, fmt.Sprintf("operation timed out after %s", time.Duration(f.timeout)))
	case f.cancelled:
		lines = append(lines, "operation cancelled")
	case errors.As(f.err, new(*ClaimedError)), errors.As(f.err, new(*LockedError)), errors.As(f.err, new(*TornStateError)),
		errors.As(f.err, new(*PolicyPackError)):
		// Our own explanation is complete: who holds the stack, and what to do.
		return truncate(unwrapStep(f.err).Error(), maxMessage)
	case class == ErrorPlanInvalid:
		// Only the engine's reasons: the other lines (a step "failed") are
		// their consequence.
		reasons := planFailure(f)
		if len(reasons) == 0 {
			reasons = []string{unwrapStep(f.err).Error()} // a PlanFileError
		}
		return truncate(planInvalidPrefix+strings.Join(reasons, "\n"), maxMessage)
	case class == ErrorLocked:
		lines = append(lines, "the stack is locked by another update; if no update runs any more, "+
			"clear the lock by hand (`pulumi cancel` against the backend, or remove the lock file named below)")
	}
	details := f.diags
	if len(details) == 0 {
		details = errorLines(f.stderr)
	}
	if len(details) == 0 {
		details = errorLines(cliStderr(f.err))
	}
	if len(details) == 0 && f.err != nil && !f.timedOut && !f.cancelled {
		details = []string{firstLine(f.err.Error())}
	}
	lines = append(lines, details...)
	return truncate(strings.Join(dedupe(lines), "\n"), maxMessage)
}

// cliStderr extracts the CLI's stderr from a CLIError, whose text
// is "<err>\ncode: N\nstdout: ...\nstderr: ...".
func cliStderr(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if i := strings.LastIndex(s, "\nstderr: "); i >= 0 {
		return s[i+len("\nstderr: "):]
	}
	return ""
}

// errorLines returns the "error: ..." lines Pulumi printed, without the prefix.
func errorLines(s string) []string {
	var out []string
	for _, m := range errorLinePattern.FindAllStringSubmatch(cleanText(s), -1) {
		if l := strings.TrimSpace(m[1]); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func firstLine(s string) string {
	s = cleanText(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

var (
	ansiPattern        = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)
	pulumiColorPattern = regexp.MustCompile(`<\{%[^%]*%\}>`)
)

// cleanText removes terminal colors and Pulumi's color markup.
func cleanText(s string) string {
	return pulumiColorPattern.ReplaceAllString(ansiPattern.ReplaceAllString(s, ""), "")
}

// cleanLines splits text into trimmed, non-empty, uncolored lines.
func cleanLines(s string) []string {
	var out []string
	for _, l := range strings.Split(cleanText(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func dedupe(lines []string) []string {
	seen := make(map[string]bool, len(lines))
	out := lines[:0:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && (s[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// Redacted replaces secret values in text.
const Redacted = "[secret]"

// shortSecret is the length under which a value is only redacted as a whole
// word: hiding every "1" or "on" inside other words would mangle messages and
// protect nothing.
const shortSecret = 6

// scrubber removes the values of a spec's Env and secret config, and the
// credentials of the files its Env names (filesecrets.go), from text.
type scrubber struct {
	long  []string
	short []*regexp.Regexp
}

func newScrubber(spec Spec) *scrubber {
	values := secretValues(spec)
	// Longest first, so that a value containing another is removed whole.
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	s := &scrubber{}
	seen := map[string]bool{}
	for _, v := range values {
		if strings.TrimSpace(v) == "" || seen[v] {
			continue
		}
		seen[v] = true
		if len(v) >= shortSecret {
			s.long = append(s.long, v)
		} else {
			s.short = append(s.short, regexp.MustCompile(`(^|\W)`+regexp.QuoteMeta(v)+`(\W|$)`))
		}
	}
	return s
}

// longest is the length of the longest value scrubbed.
func (s *scrubber) longest() int {
	n := 0
	for _, v := range s.long {
		n = max(n, len(v))
	}
	for _, re := range s.short {
		n = max(n, len(re.String())) // longer than its value: enough
	}
	return n
}

func (s *scrubber) scrub(text string) string {
	for _, v := range s.long {
		text = strings.ReplaceAll(text, v, Redacted)
	}
	for _, re := range s.short {
		text = re.ReplaceAllString(text, "${1}"+Redacted+"${2}")
	}
	return text
}

// Redact removes every value of spec.Env and every secret config value of spec
// from text. Executors use it for anything they report about a runner.
func Redact(spec Spec, text string) string {
	return newScrubber(spec).scrub(text)
}

// contextFailure reports whether the operation ended because its own deadline
// passed (timedOut) or because the caller cancelled it (cancelled). The first
// to happen wins: a runner that timed out and is then told to stop by the
// executor (its deadline passed too) still timed out.
func contextFailure(parent, op context.Context) (timedOut, cancelled bool) {
	switch {
	case errors.Is(op.Err(), context.DeadlineExceeded):
		return true, false
	case op.Err() != nil || parent.Err() != nil:
		return false, true
	}
	return false, false
}
