package executor

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/runner"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// The test binary plays the runner when fakeRunnerEnv is set; what it does is
// chosen by the spec's Env["FAKE"], as the real runner reads everything from the spec.
const fakeRunnerEnv = "STACKPILOT_FAKE_RUNNER"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeRunnerEnv) {
	case "real":
		os.Exit(runner.Main(os.Args[1:]))
	case "runner":
		os.Exit(fakeRunner(os.Args[1:]))
	case "sleeper":
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	code := m.Run()
	stopJobEnv()
	os.Exit(code)
}

func fakeRunner(args []string) int {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	specPath := fs.String("spec", "", "")
	resultPath := fs.String("result", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	spec, err := runner.ReadSpec(*specPath)
	if err != nil {
		return 2
	}
	started := time.Now().UTC()
	switch spec.Env["FAKE"] {
	case "sleep":
		d, _ := time.ParseDuration(spec.Env["SLEEP"])
		time.Sleep(d)
	case "tree":
		// Like the real runner: the pulumi CLI in the runner's group, a plugin in
		// a group of its own; then hang. On SIGTERM it notes the time in TERMED,
		// then either keeps hanging (ON_TERM=ignore, a runner slow to cancel) or
		// stops its children and writes a cancelled result (ON_TERM=cancel).
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		inGroup := exec.Command(os.Args[0])
		inGroup.Env = []string{fakeRunnerEnv + "=sleeper"}
		plugin := exec.Command(os.Args[0])
		plugin.Env = []string{fakeRunnerEnv + "=sleeper"}
		plugin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if inGroup.Start() != nil || plugin.Start() != nil {
			return 3
		}
		pids := fmt.Sprintf("%d %d %d", os.Getpid(), inGroup.Process.Pid, plugin.Process.Pid)
		_ = os.WriteFile(spec.Env["PIDS"]+".tmp", []byte(pids), 0o600)
		_ = os.Rename(spec.Env["PIDS"]+".tmp", spec.Env["PIDS"])
		select {
		case <-term:
		case <-time.After(time.Hour):
		}
		_ = os.WriteFile(spec.Env["TERMED"], []byte(time.Now().Format(time.RFC3339Nano)), 0o600)
		if spec.Env["ON_TERM"] != "cancel" {
			time.Sleep(time.Hour)
		}
		_ = inGroup.Process.Kill()
		_ = plugin.Process.Kill()
		spec.Env["OUTCOME"] = string(runner.OutcomeCancelled)
	case "crash":
		fmt.Fprintf(os.Stderr, "panic: lost the token %s\n", spec.Env["TOKEN"])
		return 3
	}
	res := runner.Result{
		APIVersion: runner.APIVersion, ID: spec.ID, Type: spec.Type, Outcome: runner.OutcomeSucceeded,
		StartedAt: started, FinishedAt: time.Now().UTC(),
		Message: spec.WorkDir + "|" + spec.PulumiHome + "|" + os.Getenv("FROM_BASE_ENV"),
		Outputs: map[string]runner.Output{"stack": {Value: spec.StackName, Secret: true}},
	}
	if spec.Env["OUTCOME"] != "" {
		res.Outcome = runner.Outcome(spec.Env["OUTCOME"])
	}
	if err := runner.WriteResult(*resultPath, res); err != nil {
		return 1
	}
	return 0
}

func newLocal(t *testing.T, concurrency int) *Local {
	t.Helper()
	return &Local{
		Command:     []string{os.Args[0]},
		WorkRoot:    filepath.Join(t.TempDir(), "ops"),
		PulumiHome:  "/shared/pulumi-home",
		Concurrency: concurrency,
		Env:         []string{fakeRunnerEnv + "=runner", "FROM_BASE_ENV=yes"},
		KillGrace:   100 * time.Millisecond,
	}
}

func fakeSpec(t *testing.T, id string, env map[string]string) runner.Spec {
	return runner.Spec{ID: id, Type: runner.OpUp, StackName: "dev", WorkDir: t.TempDir(),
		Backend: "file:///nowhere", Env: env}
}

func TestResultRoundTrip(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	spec := fakeSpec(t, "op-1", nil)
	res, err := l.Run(context.Background(), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ID).To(Equal("op-1"))
	g.Expect(res.Outcome).To(Equal(runner.OutcomeSucceeded))
	g.Expect(res.Outputs).To(Equal(map[string]runner.Output{"stack": {Value: "dev", Secret: true}}))
	g.Expect(res.Message).To(Equal(spec.WorkDir+"|/shared/pulumi-home|yes"),
		"the caller's work dir, the shared PULUMI_HOME and the base env reach the runner")
	g.Expect(l.Started()).To(Equal(int64(1)))
	g.Expect(l.Running()).To(Equal(0))
	g.Expect(filepath.Join(l.WorkRoot, "op-1")).NotTo(BeADirectory(), "the operation's files are removed")
	g.Expect(spec.WorkDir).To(BeADirectory(), "the caller's work dir is the caller's")
}

func TestPrepareWorkDir(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	var prepared string
	l.PrepareWorkDir = func(_ context.Context, dir string, spec runner.Spec) error {
		prepared = dir
		return os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: x\n"), 0o600)
	}
	spec := fakeSpec(t, "op-prep", nil)
	spec.WorkDir = ""
	res, err := l.Run(context.Background(), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(prepared).To(Equal(filepath.Join(l.WorkRoot, "op-prep", "work")))
	g.Expect(res.Message).To(HavePrefix(prepared + "|"))
	g.Expect(prepared).NotTo(BeADirectory())

	l.PrepareWorkDir = func(context.Context, string, runner.Spec) error { return errors.New("no artifact") }
	spec.ID = "op-prep-2"
	_, err = l.Run(context.Background(), spec)
	g.Expect(err).To(MatchError(ContainSubstring("no artifact")))
	g.Expect(l.Started()).To(Equal(int64(1)), "no runner for an operation that could not be prepared")
}

func TestConcurrencyBound(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 2)
	const ops = 6
	var wg sync.WaitGroup
	results := make([]runner.Result, ops)
	errs := make([]error, ops)
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	maxRunning := 0
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(5 * time.Millisecond):
				maxRunning = max(maxRunning, l.Running())
			}
		}
	}()
	for i := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = l.Run(context.Background(),
				fakeSpec(t, fmt.Sprintf("op-%d", i), map[string]string{"FAKE": "sleep", "SLEEP": "300ms"}))
		}()
	}
	wg.Wait()
	close(stopWatch)
	<-watchDone
	for i := range ops {
		g.Expect(errs[i]).NotTo(HaveOccurred())
	}
	g.Expect(l.Started()).To(Equal(int64(ops)))
	g.Expect(maxRunning).To(BeNumerically("<=", 2))
	// The runners' own clocks: at no instant (checked at every start, where the
	// count of running operations peaks) do more than two operations run.
	for _, r := range results {
		running := 0
		for _, o := range results {
			if !o.StartedAt.After(r.StartedAt) && o.FinishedAt.After(r.StartedAt) {
				running++
			}
		}
		g.Expect(running).To(BeNumerically("<=", 2), "when %s started", r.ID)
	}
}

func TestWaitingForASlotRespectsTheContext(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	done := make(chan error)
	go func() {
		_, err := l.Run(context.Background(), fakeSpec(t, "long", map[string]string{"FAKE": "sleep", "SLEEP": "5s"}))
		done <- err
	}()
	g.Eventually(l.Running, 30*time.Second, 50*time.Millisecond).Should(Equal(1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := l.Run(ctx, fakeSpec(t, "waiting", nil))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(l.Started()).To(Equal(int64(1)))
	g.Expect(<-done).To(Succeed())
}

func readPids(g Gomega, path string) []int {
	g.Eventually(path, 10*time.Second, 20*time.Millisecond).Should(BeAnExistingFile())
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	g.Expect(pids).To(HaveLen(3))
	return pids
}

func living(pids []int) func() []int {
	return func() []int {
		var live []int
		for _, p := range pids {
			if runner.ProcessAlive(p) {
				live = append(live, p)
			}
		}
		return live
	}
}

// treeSpec is a fake runner with a process tree like the real one; it notes in
// the returned file when it got SIGTERM.
func treeSpec(t *testing.T, id, onTerm string) (spec runner.Spec, pidFile, termed string) {
	dir := t.TempDir()
	pidFile, termed = filepath.Join(dir, "pids"), filepath.Join(dir, "termed")
	return fakeSpec(t, id, map[string]string{"FAKE": "tree", "PIDS": pidFile, "TERMED": termed, "ON_TERM": onTerm}),
		pidFile, termed
}

func termedAt(g Gomega, path string) time.Time {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred(), "the runner was asked to stop with SIGTERM")
	at, err := time.Parse(time.RFC3339Nano, string(data))
	g.Expect(err).NotTo(HaveOccurred())
	return at
}

// TestTimeoutStopsThenKillsTheProcessTree: past Spec.Timeout+KillGrace the
// runner is asked to stop, and its whole tree is killed only CancelGrace later.
// The timeout is long enough for the fake runner to have started and set its
// SIGTERM handler, on a machine as busy as CI's (with 300 ms, a runner not
// started yet died of the signal it was to note: the test failed under load).
func TestTimeoutStopsThenKillsTheProcessTree(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	l.CancelGrace = time.Second
	spec, pidFile, termed := treeSpec(t, "hangs", "ignore")
	timeout := 5 * time.Second
	spec.Timeout = runner.Duration(timeout)

	start := time.Now()
	_, err := l.Run(context.Background(), spec)
	end := time.Now()
	runnerErr, ok := errors.AsType[*RunnerError](err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(runnerErr.Reason).To(Equal(ReasonTimeout))
	g.Expect(err).To(MatchError(ErrTimeout))
	at := termedAt(g, termed)
	g.Expect(readPids(g, pidFile)).To(HaveLen(3), "the runner had started its tree before the timeout")
	g.Expect(at.Sub(start)).To(BeNumerically(">=", timeout+l.KillGrace), "signalled at Timeout+KillGrace, not before")
	g.Expect(end.Sub(at)).To(BeNumerically(">=", 900*time.Millisecond), "killed only after the cancel grace")
	// SIGKILLed processes take a moment to finish dying on a busy machine.
	g.Eventually(living(readPids(g, pidFile)), 30*time.Second, 20*time.Millisecond).Should(BeEmpty(),
		"the runner, the grandchild in its group and the plugin-like group leader are dead")
	g.Expect(l.Running()).To(Equal(0))
}

// TestCancelStopsThenKillsTheProcessTree: when the caller stops (controller
// shutdown), the runner gets SIGTERM first; a runner that does not end within
// CancelGrace is killed with its whole tree.
func TestCancelStopsThenKillsTheProcessTree(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	l.CancelGrace = time.Second
	spec, pidFile, termed := treeSpec(t, "cancelled", "ignore")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := l.Run(ctx, spec)
		errc <- err
	}()
	pids := readPids(g, pidFile)
	cancelled := time.Now()
	cancel()
	g.Eventually(termed, 30*time.Second, 10*time.Millisecond).Should(BeAnExistingFile(), "SIGTERM first")
	g.Consistently(living(pids), 500*time.Millisecond, 20*time.Millisecond).Should(HaveLen(3),
		"nothing is killed during the grace")
	err := <-errc
	g.Expect(time.Since(cancelled)).To(BeNumerically(">=", time.Second))
	g.Expect(err).To(MatchError(context.Canceled))
	runnerErr, _ := errors.AsType[*RunnerError](err)
	g.Expect(runnerErr.Reason).To(Equal(ReasonCancelled))
	g.Eventually(living(pids), 30*time.Second, 20*time.Millisecond).Should(BeEmpty())
}

// TestCancelledRunnerReportsItsResult: a runner that cancels in time is not
// killed, and its result (cancelled) is the operation's.
func TestCancelledRunnerReportsItsResult(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	l.CancelGrace = time.Minute
	spec, pidFile, termed := treeSpec(t, "graceful", "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	type out struct {
		res runner.Result
		err error
	}
	done := make(chan out)
	go func() {
		res, err := l.Run(ctx, spec)
		done <- out{res, err}
	}()
	pids := readPids(g, pidFile)
	cancel()
	var o out
	g.Eventually(done, 20*time.Second).Should(Receive(&o))
	g.Expect(o.err).NotTo(HaveOccurred())
	g.Expect(o.res.Outcome).To(Equal(runner.OutcomeCancelled))
	g.Expect(termed).To(BeAnExistingFile())
	g.Eventually(living(pids), 30*time.Second, 20*time.Millisecond).Should(BeEmpty())
}

// TestStoppingCallerStartsNoRunner: a context that ended while waiting for a
// slot starts nothing, even when the slot is free too.
func TestStoppingCallerStartsNoRunner(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		_, err := l.Run(ctx, fakeSpec(t, "late", nil))
		g.Expect(err).To(MatchError(context.Canceled))
	}
	g.Expect(l.Started()).To(BeZero())
}

func TestRunnerWithoutResult(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	_, err := l.Run(context.Background(), fakeSpec(t, "crash", map[string]string{"FAKE": "crash", "TOKEN": "tok-s3cr3t-42"}))
	runnerErr, ok := errors.AsType[*RunnerError](err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(runnerErr.Reason).To(Equal(ReasonExited))
	g.Expect(runnerErr.ExitCode).To(Equal(3))
	g.Expect(err).To(MatchError(runner.ErrNoResult))
	g.Expect(runnerErr.Stderr).To(ContainSubstring("panic: lost the token [secret]"))
	g.Expect(err.Error()).NotTo(ContainSubstring("tok-s3cr3t-42"))
	g.Expect(filepath.Join(l.WorkRoot, "crash")).NotTo(BeADirectory())
}

func TestKeepFailed(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	l.KeepFailed = true
	_, err := l.Run(context.Background(), fakeSpec(t, "failed", map[string]string{"OUTCOME": "failed"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(l.WorkRoot, "failed", "spec.json")).To(BeAnExistingFile())
	_, err = l.Run(context.Background(), fakeSpec(t, "ok", nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(l.WorkRoot, "ok")).NotTo(BeADirectory())

	_, err = l.Run(context.Background(), fakeSpec(t, "failed", nil))
	g.Expect(err).To(MatchError(ContainSubstring("exists")), "an ID is one operation")
}

func TestRejectsUnsafeIDs(t *testing.T) {
	g := NewWithT(t)
	l := newLocal(t, 1)
	for _, id := range []string{"", ".", "..", "../x", "a/b"} {
		_, err := l.Run(context.Background(), fakeSpec(t, id, nil))
		g.Expect(err).To(HaveOccurred(), "id %q", id)
	}
	g.Expect(l.Started()).To(BeZero())
}

func TestRealRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Pulumi CLI")
	}
	g := NewWithT(t)
	bin, err := testenv.BinDir()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testenv.RequireBinaries(bin, "pulumi", "pulumi-language-yaml")).To(Succeed())

	l := newLocal(t, 1)
	l.Env = []string{fakeRunnerEnv + "=real", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	l.PulumiHome = t.TempDir()
	l.PrepareWorkDir = func(_ context.Context, dir string, _ runner.Spec) error {
		return os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(`name: real
runtime: yaml
config:
  who:
    type: string
outputs:
  hello: hello ${who}
`), 0o600)
	}
	env := testenv.PulumiEnv(bin)
	env["PULUMI_CONFIG_PASSPHRASE"] = "pass"
	spec := runner.Spec{ID: "real-up", Type: runner.OpUp, StackName: "dev",
		Backend: "file://" + filepath.Join(t.TempDir(), "state"), PulumiCommand: filepath.Join(bin, "pulumi"),
		Config: []runner.ConfigValue{{Key: "who", Value: "world", Secret: true}}, Env: env,
		Timeout: runner.Duration(5 * time.Minute)}
	res, err := l.Run(context.Background(), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Outcome).To(Equal(runner.OutcomeSucceeded), res.Message)
	g.Expect(res.Outputs).To(HaveKeyWithValue("hello", runner.Output{Value: "hello world", Secret: true}))
	g.Expect(filepath.Join(l.WorkRoot, "real-up")).NotTo(BeADirectory())
}

const awaitingProgram = `name: stuck
runtime: yaml
config:
  namespace:
    type: string
  kubeconfig:
    type: string
  annotations:
    type: object
resources:
  provider:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
  app:
    type: kubernetes:apps/v1:Deployment
    properties:
      metadata:
        name: app
        namespace: ${namespace}
        annotations: ${annotations}
      spec:
        selector:
          matchLabels: {app: app}
        template:
          metadata:
            labels: {app: app}
          spec:
            containers:
              - name: app
                image: registry.invalid/app:1
    options:
      provider: ${provider}
`

// processesIn lists the processes whose working directory is under dir: the
// pulumi CLI and its plugins run in the operation's work dir.
func processesIn(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil || !strings.HasPrefix(cwd, dir) {
			continue
		}
		if pid, _ := strconv.Atoi(e.Name()); runner.ProcessAlive(pid) {
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

// TestRealRunnerStoppedMidUp: a runner asked to stop mid-up cancels Pulumi,
// which releases its lock and leaves no process; one that does not stop within
// CancelGrace is killed with its tree and leaves the lock, which the next
// operation's ClearStaleLock recovers.
func TestRealRunnerStoppedMidUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Pulumi CLI against an API server")
	}
	g := NewWithT(t)
	bin, err := testenv.BinDir()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testenv.RequireBinaries(bin, "pulumi", "pulumi-language-yaml", "pulumi-resource-kubernetes")).To(Succeed())
	kube, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = kube.Stop() }()
	ns := kube.Namespace(t)

	l := newLocal(t, 1)
	l.Env = []string{fakeRunnerEnv + "=real", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	l.PulumiHome = t.TempDir()
	l.PrepareWorkDir = func(_ context.Context, dir string, _ runner.Spec) error {
		return os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(awaitingProgram), 0o600)
	}
	state := filepath.Join(t.TempDir(), "state")
	env := testenv.PulumiEnv(bin)
	env["PULUMI_CONFIG_PASSPHRASE"] = "pass"
	// An object: a top-level "true" would reach the program as a bool (Pulumi
	// coerces untyped scalars), and annotations must be strings.
	spec := func(id string, typ runner.OperationType, skipAwait string) runner.Spec {
		return runner.Spec{ID: id, Type: typ, StackName: "dev", Backend: "file://" + state,
			PulumiCommand: filepath.Join(bin, "pulumi"), Env: env, Timeout: runner.Duration(5 * time.Minute),
			Config: []runner.ConfigValue{{Key: "namespace", Value: ns}, {Key: "kubeconfig", Value: kube.Kubeconfig},
				{Key: "annotations", Value: map[string]string{"pulumi.com/skipAwait": skipAwait,
					// The killed create is a pending create Pulumi drops from the state:
					// take over the object it left, owned by the killed provider.
					"pulumi.com/patchForce": "true"}}}}
	}
	lockGlob := filepath.Join(state, ".pulumi", "locks", "organization", "stuck", "dev", "*.json")
	locks := func() []string { m, _ := filepath.Glob(lockGlob); return m }
	type out struct {
		res runner.Result
		err error
	}
	// stuckUp starts an up whose provider waits for a rollout that never comes
	// (no kubelet), and stops it once Pulumi holds the lock and the Deployment exists.
	stuckUp := func(id string) out {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan out, 1)
		go func() {
			res, err := l.Run(ctx, spec(id, runner.OpUp, "false"))
			done <- out{res, err}
		}()
		g.Eventually(locks, 2*time.Minute, 100*time.Millisecond).ShouldNot(BeEmpty())
		g.Eventually(func() error {
			var d appsv1.Deployment
			return kube.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, &d)
		}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
		opDir := filepath.Join(l.WorkRoot, id)
		g.Expect(processesIn(opDir)).NotTo(BeEmpty(), "pulumi and its plugins run in the work dir")
		cancel()
		var o out
		g.Eventually(done, 2*time.Minute).Should(Receive(&o))
		g.Eventually(func() []string { return processesIn(opDir) }, 30*time.Second, 50*time.Millisecond).Should(BeEmpty(),
			"the pulumi CLI, the language host and the provider are all gone")
		return o
	}

	graceful := stuckUp("graceful-up")
	g.Expect(graceful.err).NotTo(HaveOccurred())
	g.Expect(graceful.res.Outcome).To(Equal(runner.OutcomeCancelled), graceful.res.Message)
	g.Expect(locks()).To(BeEmpty(), "cancelled: Pulumi released its lock")

	l.CancelGrace = time.Millisecond // a runner that does not stop in time
	stuckStarted := time.Now()
	killed := stuckUp("stuck-up")
	g.Expect(killed.err).To(MatchError(context.Canceled))
	g.Expect(locks()).To(HaveLen(1), "killed like a crash: the lock stays")

	locked, err := l.Run(context.Background(), spec("locked-up", runner.OpUp, "true"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(locked.Outcome).To(Equal(runner.OutcomeConflict))

	recovery := spec("recover-up", runner.OpUp, "true")
	host, _ := os.Hostname()
	recovery.StaleLock = &runner.StaleLock{Host: host, NotBefore: stuckStarted}
	res, err := l.Run(context.Background(), recovery)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("recovery: %+v", res)
	g.Expect(res.ClearedLocks).To(Equal(1))
	g.Expect(res.Outcome).To(Equal(runner.OutcomeSucceeded), res.Message)
	g.Expect(locks()).To(BeEmpty())
}
