package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Run performs one operation, starting one pulumi process for it in the steady
// state (see pulumiCLI). It always returns a Result, whatever happens (a panic
// included), and its Message never holds a value of spec.Env or of a secret
// config value.
func Run(ctx context.Context, spec Spec) (res Result) {
	res = Result{APIVersion: APIVersion, ID: spec.ID, Type: spec.Type, StartedAt: time.Now().UTC()}
	defer func() {
		if r := recover(); r != nil {
			res.Outcome, res.ErrorClass = OutcomeFailed, ErrorInternal
			res.Message = fmt.Sprintf("runner panic: %v", r)
		}
		res.Message = newScrubber(spec).scrub(res.Message)
		res.FinishedAt = time.Now().UTC()
	}()

	opCtx, cancel := ctx, context.CancelFunc(func() {})
	if spec.Timeout > 0 {
		opCtx, cancel = context.WithTimeout(ctx, time.Duration(spec.Timeout))
	}
	defer cancel()

	o := &operation{
		spec:   spec,
		events: newEventCollector(spec.Type == OpRefresh || spec.Type == OpDriftCheck),
		stderr: &tailBuffer{max: 64 << 10},
	}
	err := o.run(opCtx, &res)
	if o.scratch != "" {
		os.RemoveAll(o.scratch)
	}
	if o.cli != nil {
		res.PulumiProcesses = int(o.cli.started.Load())
	}
	res.Changes = o.events.counts()
	res.Resources = o.events.changes()
	res.Policy = o.events.policyFindings()
	if msg, refused := policyViolation(res.Policy); err != nil && refused {
		// The engine stopped at a mandatory rule: that, not the CLI's exit
		// status, is what the user has to act on.
		res.Outcome, res.ErrorClass, res.Message = OutcomeFailed, ErrorPolicy, msg
		return res
	}
	if err == nil {
		res.Outcome = OutcomeSucceeded
		return res
	}
	f := failure{err: err, diags: o.events.errors(), stderr: o.stderr.String(), timeout: spec.Timeout}
	f.timedOut, f.cancelled = contextFailure(ctx, opCtx)
	res.Outcome, res.ErrorClass = classify(f)
	res.Message = message(f, res.ErrorClass)
	return res
}

// tailBuffer keeps the last max bytes written to it: Pulumi's error lines come
// at the end, and a long run must not grow the runner's memory without bound.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if len(t.buf) >= t.max {
		// The cut may have split a line: drop the partial first line.
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}
