// Command processes counts the pulumi processes each kind of operation starts,
// counted from an exec wrapper's log (dev/bench/internal/pulumiwrap), never from
// what the runner reports.
//
// It runs the runner directly, as the controller's executor does
// (`<controller binary> runner --spec <file> --result <file>`, a fresh copy of
// the program for each operation, a file:// backend), through a sequence of
// operations on one stack: the first up that creates it, a steady-state up
// with a change, ups with a secret config value and a secret output, preview,
// refresh, drift-check, outputs and destroy. The wrapper is the spec's
// pulumiCommand and also comes first on the runner's PATH, so that a CLI
// found by name is counted too. Then it runs one commit-to-Ready through the
// controller (its --pulumi at another wrapper) and counts that operation's
// processes.
//
//	go -C dev run ./bench/processes [-timeout 5m] [-v] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
	"github.com/stackpilot/stackpilot/dev/internal/testenv"
	"github.com/stackpilot/stackpilot/internal/runner"
)

const (
	namespace = "bench-processes"
	project   = "processes"
	stackName = "processes"
	repo      = "processes"
	branch    = "main"
	dir       = "app"
	token     = "bench-secret-token-value"
)

type options struct {
	timeout time.Duration
	verbose bool
	keep    bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	// A flag set of its own: the Pulumi SDK, through internal/runner,
	// registers glog's -v on the default one.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "Bound on each operation and each wait for Ready.")
	fs.BoolVar(&o.verbose, "v", false, "Copy the controller's log to stderr.")
	fs.BoolVar(&o.keep, "keep", false, "Keep the temporary directory (logs, state, specs, results, the wrappers' logs).")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/processes:", err)
		os.Exit(1)
	}
}

// step is one runner operation of the sequence.
type step struct {
	name   string
	typ    runner.OperationType
	run    int  // the ConfigMap's data.run: a change when it differs from the last up's
	secret bool // the program with a secret config value and a secret output
}

var steps = []step{
	{"up, new stack (first apply)", runner.OpUp, 1, false},
	{"up, steady state (a change)", runner.OpUp, 2, false},
	{"up, + secret config and output", runner.OpUp, 3, true},
	{"up, secrets, steady state", runner.OpUp, 4, true},
	{"preview (a change)", runner.OpPreview, 5, true},
	{"refresh", runner.OpRefresh, 4, true},
	{"drift-check", runner.OpDriftCheck, 4, true},
	{"outputs", runner.OpOutputs, 4, true},
	{"destroy", runner.OpDestroy, 4, true},
}

// row is what the table shows for one operation.
type row struct {
	name     string
	procs    int
	commands string
	wall     time.Duration // the runner process, start to exit (for the controller: commit to Ready)
	inside   time.Duration // inside pulumi processes
	foreign  int           // calls whose parent is not the runner
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "processes", "processes: pulumi processes per operation, counted by an exec wrapper", os.Stdout)
	if err != nil {
		return err
	}
	e.Verbose, e.Keep = o.verbose, o.keep
	defer e.Close()
	if err := e.Namespace(ctx, namespace); err != nil {
		return err
	}
	wrap, err := e.NewWrapper(ctx, "wrap")
	if err != nil {
		return err
	}

	cpu := benchenv.TakeCPU()
	d := &direct{e: e, wrap: wrap, timeout: o.timeout,
		backend: "file://" + filepath.Join(e.Tmp, "runner-state"), home: filepath.Join(e.Tmp, "pulumi-home")}
	var rows []row
	for i, s := range steps {
		r, err := d.operation(ctx, i, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		e.Logf("%-32s %d pulumi processes (%s), runner %s", s.name, r.procs, r.commands, benchenv.Seconds(r.wall))
		rows = append(rows, r)
	}

	ctrlRows, err := throughController(ctx, e, o)
	if err != nil {
		return err
	}
	cpuLine := benchenv.CPUSince(cpu)

	fmt.Printf("\n== processes results: the runner run directly (file:// backend, a fresh work dir per operation)\n")
	printRows("operation", "runner wall", rows)
	fmt.Printf("\n== through the controller (one Stack, file:// backend)\n")
	printRows("operation", "commit-to-Ready", ctrlRows)
	fmt.Printf("\ncounted from the wrapper's log (%s/calls.log): one line per pulumi process, whatever the runner reports;\n", wrap.Dir)
	fmt.Printf("target: 1 per up, preview, refresh and destroy in the steady state (2 on a first apply), 0 for outputs from a file backend.\n")
	fmt.Printf("inside pulumi: wall time during which at least one pulumi process of the operation ran.\n")
	fmt.Println(cpuLine)
	fmt.Printf("load average at the end: %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
	return nil
}

func printRows(first, wallName string, rows []row) {
	fmt.Printf("%-34s %6s %16s %14s  %s\n", first, "procs", wallName, "inside pulumi", "their subcommands (argv[1], in order)")
	for _, r := range rows {
		note := ""
		if r.foreign > 0 {
			note = fmt.Sprintf("  (%d not started by the runner itself)", r.foreign)
		}
		fmt.Printf("%-34s %6d %16s %14s  %s%s\n", r.name, r.procs, benchenv.Seconds(r.wall), benchenv.Seconds(r.inside), r.commands, note)
	}
}

// direct runs the runner process itself, the way the controller's executor
// does, with the wrapper as its pulumi.
type direct struct {
	e             *benchenv.Env
	wrap          *benchenv.Wrapper
	timeout       time.Duration
	backend, home string
}

func (d *direct) operation(ctx context.Context, i int, s step) (row, error) {
	opDir := filepath.Join(d.e.Tmp, "ops", fmt.Sprintf("%02d-%s", i, s.typ))
	work := filepath.Join(opDir, "program")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return row{}, err
	}
	if err := os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte(benchenv.ConfigMapProgram(project, s.run, s.secret)), 0o644); err != nil {
		return row{}, err
	}
	config := []runner.ConfigValue{
		{Key: "namespace", Value: namespace},
		{Key: "configMapName", Value: "processes-runner"},
		{Key: "kubernetes:enableConfigMapMutable", Value: true},
	}
	if s.secret {
		config = append(config, runner.ConfigValue{Key: "token", Value: token, Secret: true})
	}
	spec := runner.Spec{
		APIVersion: runner.APIVersion, ID: fmt.Sprintf("bench-%02d-%s", i, s.typ), Type: s.typ,
		WorkDir: work, StackName: stackName, Backend: d.backend, PulumiHome: d.home,
		PulumiCommand: d.wrap.Pulumi(), Config: config,
		Env:     map[string]string{"PULUMI_CONFIG_PASSPHRASE": benchenv.Passphrase},
		Claim:   namespace + "/" + stackName, // as the controller sets it
		Timeout: runner.Duration(d.timeout),
	}
	specPath, resultPath := filepath.Join(opDir, "spec.json"), filepath.Join(opDir, "result.json")
	if err := runner.WriteSpec(specPath, spec); err != nil {
		return row{}, err
	}
	n, err := d.wrap.Count()
	if err != nil {
		return row{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, d.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.e.ControllerBin, "runner", "--spec", specPath, "--result", resultPath)
	cmd.Env = append(d.e.PulumiEnv(), "PATH="+d.wrap.BinDir()+string(os.PathListSeparator)+testenv.PulumiEnv(d.e.Bin)["PATH"])
	logPath := filepath.Join(opDir, "runner.log")
	log, err := os.Create(logPath)
	if err != nil {
		return row{}, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return row{}, fmt.Errorf("runner: %v (log %s)", err, logPath)
	}
	wall := time.Since(start)
	runnerPid := cmd.Process.Pid

	// The result only says whether the operation did what the row claims.
	res, err := runner.ReadResult(resultPath)
	if err != nil {
		return row{}, err
	}
	if res.Outcome != runner.OutcomeSucceeded {
		return row{}, fmt.Errorf("outcome %s (%s): %s (runner log %s)", res.Outcome, res.ErrorClass, res.Message, logPath)
	}
	if s.secret && (s.typ == runner.OpUp || s.typ == runner.OpOutputs) && !res.Outputs["token"].Secret {
		return row{}, fmt.Errorf("output token is not secret: %+v", res.Outputs["token"].Secret)
	}

	calls, err := d.wrap.CallsFrom(n)
	if err != nil {
		return row{}, err
	}
	r := row{name: s.name, procs: len(calls), commands: benchenv.Commands(calls), wall: wall, inside: benchenv.WallInside(calls)}
	for _, c := range calls {
		if c.Ppid != runnerPid {
			r.foreign++
		}
	}
	return r, nil
}

// throughController runs one Stack's first apply and one commit-to-Ready
// through the controller and counts each one's pulumi processes.
func throughController(ctx context.Context, e *benchenv.Env, o options) ([]row, error) {
	wrap, err := e.NewWrapper(ctx, "wrap-controller")
	if err != nil {
		return nil, err
	}
	ctrl, err := e.StartController(ctx, namespace, benchenv.PulumiArgs(wrap)...)
	if err != nil {
		return nil, err
	}
	stack, err := benchenv.StackSpec{
		Namespace: namespace, Name: stackName, URL: e.Git.URL(repo), Branch: branch, Dir: dir,
		Interval: time.Hour, // nothing else runs
		Config: map[string]any{
			"namespace": namespace, "configMapName": "processes-controller",
			"kubernetes:enableConfigMapMutable": true,
		},
	}.Stack()
	if err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(stack)
	var rows []row
	for i, name := range []string{"Stack created (first apply)", "one commit -> Ready (steady state)"} {
		n, err := wrap.Count()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		commit, err := e.Commit(repo, branch, map[string]string{dir + "/Pulumi.yaml": benchenv.ConfigMapProgram(project, i+1, false)}, fmt.Sprintf("run %d", i+1))
		if err != nil {
			return nil, err
		}
		if i == 0 {
			err = e.Client.Create(ctx, stack)
		} else {
			err = e.RequestReconcile(ctx, key)
		}
		if err != nil {
			return nil, err
		}
		if err := waitApplied(ctx, e, key, commit, o.timeout); err != nil {
			return nil, fmt.Errorf("%s: %w (controller log %s)", name, err, ctrl.LogPath)
		}
		wall := time.Since(start)
		calls, err := wrap.CallsFrom(n)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{name: name, procs: len(calls), commands: benchenv.Commands(calls), wall: wall, inside: benchenv.WallInside(calls)})
		e.Logf("controller: %-34s %d pulumi processes (%s), %s", name, len(calls), benchenv.Commands(calls), benchenv.Seconds(wall))
	}
	return rows, nil
}

func waitApplied(ctx context.Context, e *benchenv.Env, key client.ObjectKey, commit string, timeout time.Duration) error {
	_, err := e.WaitApplied(ctx, key, commit, timeout)
	return err
}
