package runner

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
)

// parentPollInterval is how often the runner checks that its parent is alive.
const parentPollInterval = 500 * time.Millisecond

// Main is the runner process: `<binary> runner --spec <file> --result <file>`,
// args being what follows the subcommand. It exits 0 whenever it wrote a result,
// whatever the outcome of the operation, and non-zero only when it could not.
//
// Signals: SIGTERM or SIGINT cancel the operation gracefully: the pulumi CLI
// gets SIGINT, finishes the steps in flight, writes its checkpoint and releases
// the stack lock (see interruptibleCommand), and a "cancelled" result is
// written. The executor sends that signal when its caller stops (controller
// shutdown) or the operation runs past its timeout, and kills the whole process
// tree only when the runner takes longer than its cancel grace. When the parent dies (noticed by ParentDeathSignal, which the Local
// executor asks the kernel for, or by polling the parent PID), the runner kills
// its whole process tree at once instead, Pulumi included: it leaves the stack
// lock behind exactly as a crash would, and the next operation's StaleLock
// recovers it. Nobody is left to read a result, and a slow graceful cancel would
// race the new controller's next operation on the same stack.
func Main(args []string) int {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	specPath := fs.String("spec", "", "operation spec (JSON) to run")
	resultPath := fs.String("result", "", "where to write the result (JSON)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *specPath == "" || *resultPath == "" {
		fmt.Fprintln(os.Stderr, "runner: --spec and --result are required")
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := BecomeSubreaper(); err != nil {
		log.Warn("cannot adopt orphaned plugins (prctl PR_SET_CHILD_SUBREAPER)", "error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer supervise(ctx, cancel, log)()

	spec, err := ReadSpec(*specPath)
	var res Result
	if err != nil {
		res = specFailure(spec, err)
	} else {
		log.Info("operation started", "id", spec.ID, "type", spec.Type, "stack", spec.StackName,
			"backend", backendScheme(spec.Backend))
		res = Run(ctx, spec)
	}
	// Pulumi stops its plugins when it ends; one it lost (its CLI was killed
	// after InterruptGrace) was adopted by the runner and must not outlive it.
	KillDescendants()
	if err := WriteResult(*resultPath, res); err != nil {
		log.Error("cannot write the result", "path", *resultPath, "error", err)
		return 1
	}
	log.Info("operation finished", "id", res.ID, "outcome", res.Outcome, "errorClass", res.ErrorClass,
		"duration", res.FinishedAt.Sub(res.StartedAt).Round(time.Millisecond).String(),
		"create", res.Changes.Create, "update", res.Changes.Update, "replace", res.Changes.Replace,
		"delete", res.Changes.Delete, "message", res.Message)
	return 0
}

// ParentDeathSignal is the signal an executor asks the kernel to send the
// runner when the executor dies (Linux's parent-death signal).
//
// Why a signal of its own: the kernel sends it when the *thread* that started the
// runner exits. While a Go process exits, that thread may go first and the runner
// is handed to a sibling thread of the same, still dying, process: the signal
// then arrives with the parent PID unchanged. A dedicated signal can be ignored
// in that case (another one follows when the runner is re-parented to init)
// without being mistaken for a request to cancel.
const ParentDeathSignal = syscall.SIGUSR1

// supervise ties the runner's life to its parent: SIGTERM and SIGINT cancel ctx
// (graceful), a dead parent gets the whole process tree killed. It returns a
// stop function.
func supervise(ctx context.Context, cancel context.CancelFunc, log *slog.Logger) (stop func()) {
	ppid := os.Getppid()
	orphaned := func(how string) {
		log.Error("parent process is gone: killing the operation's processes", "via", how, "parent", ppid)
		KillProcessTree(os.Getpid())
	}
	go watchParent(ctx, ppid, parentPollInterval, func() { orphaned("poll") })
	stopDeath := onSignals(func() {
		if parentGone(ppid) {
			orphaned("parent-death signal")
		}
	}, ParentDeathSignal)
	stopCancel := onSignals(func() {
		if parentGone(ppid) {
			orphaned("signal")
			return
		}
		log.Info("signal received: cancelling the operation")
		cancel()
	}, syscall.SIGTERM, syscall.SIGINT)
	return func() {
		stopCancel()
		stopDeath()
	}
}

// watchParent calls orphaned once when the parent process changes (the kernel
// re-parents an orphan to init or a subreaper). A runner started by PID 0 or 1
// (a container's init) has nothing to watch.
func watchParent(ctx context.Context, ppid int, every time.Duration, orphaned func()) {
	if ppid <= 1 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if parentGone(ppid) {
				orphaned()
				return
			}
		}
	}
}

func parentGone(ppid int) bool { return ppid > 1 && os.Getppid() != ppid }

// onSignals calls fn for every one of sigs until stop is called: a second
// signal after the first cancelled the operation is still handled.
func onSignals(fn func(), sigs ...os.Signal) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				fn()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// specFailure is the result for a spec that could not be read or is for another
// runner version.
func specFailure(spec Spec, err error) Result {
	now := time.Now().UTC()
	return Result{
		APIVersion: APIVersion, ID: spec.ID, Type: spec.Type,
		Outcome: OutcomeFailed, ErrorClass: ErrorInternal,
		Message:   Redact(spec, err.Error()),
		StartedAt: now, FinishedAt: now,
	}
}

func backendScheme(backend string) string {
	if i := strings.Index(backend, "://"); i >= 0 {
		return backend[:i]
	}
	return "unknown"
}

// ReadSpec reads a spec file and checks its APIVersion. On a version mismatch
// the decoded spec is returned with the error, so the result can name the operation.
func ReadSpec(path string) (Spec, error) {
	var spec Spec
	data, err := os.ReadFile(path)
	if err != nil {
		return spec, err
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return spec, fmt.Errorf("cannot decode spec %s: %w", path, err)
	}
	if spec.APIVersion != APIVersion {
		return spec, &SpecError{Reason: fmt.Sprintf("apiVersion %q, this runner speaks %q", spec.APIVersion, APIVersion)}
	}
	return spec, nil
}

// WriteSpec writes a spec file readable only by its owner: it holds secrets.
func WriteSpec(path string, spec Spec) error {
	if spec.APIVersion == "" {
		spec.APIVersion = APIVersion
	}
	return writeJSONAtomic(path, spec)
}

// WriteResult writes a result file atomically (temporary file, then rename), so
// a reader never sees half a result, even when the runner is killed mid-write.
// It holds secret outputs, so it is readable only by its owner.
func WriteResult(path string, res Result) error {
	return writeJSONAtomic(path, res)
}

// ErrNoResult says the result file does not exist: the runner ended without one.
var ErrNoResult = errors.New("the runner wrote no result")

// ReadResult reads a result file and checks its APIVersion.
func ReadResult(path string) (Result, error) {
	var res Result
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return res, ErrNoResult
	}
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return res, fmt.Errorf("cannot decode result %s: %w", path, err)
	}
	if res.APIVersion != APIVersion {
		return res, fmt.Errorf("result apiVersion %q, expected %q", res.APIVersion, APIVersion)
	}
	return res, nil
}

func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
