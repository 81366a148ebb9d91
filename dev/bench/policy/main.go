// Command policy measures what StackPolicy rules cost an up (issue 25): 100
// rules over a 500-resource up, side by side with the same up and no policy.
//
// Three stacks of the same program (500 ConfigMaps through the Kubernetes
// provider, each with data.run from config, so that a new run updates all
// 500) on one file:// backend each, run by the runner process as the
// controller's executor runs it (`<controller binary> runner --spec`):
//
//   - plain: no policy;
//   - rules: 100 rules that match every ConfigMap (half mandatory, half
//     advisory, all compliant, so that the up goes through and every rule
//     is evaluated on every resource): the analyzer inside the engine;
//   - rules+delete: the same and one rule that lists delete, which makes the
//     up save an update plan first and apply it (one preview more).
//
// After a first up each (the creates, reported but not the measure), it runs
// -rounds rounds of one up per stack with a new run, the order of the
// stacks turned each round, and prints each up's wall time (the runner
// process, start to exit), the medians, and the overhead of each policy
// variant against plain: target at most 5 % for rules.
//
//	go -C dev run ./bench/policy [-resources 500] [-rules 100] [-rounds 3] [-timeout 10m] [-v] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/dev/bench/internal/benchenv"
	"github.com/stackpilot/stackpilot/internal/policy"
	"github.com/stackpilot/stackpilot/internal/runner"
)

const namespace = "bench-policy"

type options struct {
	resources, rules, rounds int
	timeout                  time.Duration
	verbose, keep            bool
}

func main() {
	benchenv.OwnFlags()
	var o options
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.IntVar(&o.resources, "resources", 500, "ConfigMaps in the program.")
	fs.IntVar(&o.rules, "rules", 100, "Rules in the policy.")
	fs.IntVar(&o.rounds, "rounds", 3, "Measured ups per stack.")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "Bound on each up.")
	fs.BoolVar(&o.verbose, "v", false, "Print each up as it ends.")
	fs.BoolVar(&o.keep, "keep", false, "Keep the temporary directory (specs, results, runner logs, state).")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/policy:", err)
		os.Exit(1)
	}
}

// variant is one stack of the comparison.
type variant struct {
	name   string
	policy *runner.PolicySpec
	walls  []time.Duration // the measured ups
	procs  []int
}

func run(ctx context.Context, o options) error {
	e, err := benchenv.Start(ctx, "policy", fmt.Sprintf("policy: %d rules over a %d-resource up, against the same up with no policy", o.rules, o.resources), os.Stdout)
	if err != nil {
		return err
	}
	e.Keep = o.keep
	defer e.Close()
	if err := e.Namespace(ctx, namespace); err != nil {
		return err
	}
	rules := rules(o.rules)
	stack := policy.Stack{Namespace: namespace, Name: "bench"}
	guard := policy.Policy{Kind: "StackPolicy", Namespace: namespace, Name: "bench", Rules: rules}
	withDelete := guard
	withDelete.Rules = append(slices.Clone(rules), policy.Rule{Name: "no-delete", Match: policy.Match{Operations: []policy.Operation{policy.Delete}},
		Expression: "resource.oldInputs.data.keep != 'true'", Message: "kept"})
	variants := []*variant{
		{name: "plain"},
		{name: "rules", policy: &runner.PolicySpec{Stack: stack, Policies: []policy.Policy{guard}}},
		{name: "rules+delete", policy: &runner.PolicySpec{Stack: stack, Policies: []policy.Policy{withDelete}}},
	}
	cpu := benchenv.TakeCPU()
	for _, v := range variants {
		wall, procs, findings, err := up(ctx, e, o, v, 0)
		if err != nil {
			return fmt.Errorf("%s: first up: %w", v.name, err)
		}
		e.Logf("%-13s first up (%d creates): %s, %d pulumi processes, %d findings", v.name, o.resources, benchenv.Seconds(wall), procs, findings)
	}
	for round := 1; round <= o.rounds; round++ {
		order := slices.Clone(variants)
		for i := 0; i < round%len(order); i++ {
			order = append(order[1:], order[0])
		}
		for _, v := range order {
			wall, procs, findings, err := up(ctx, e, o, v, round)
			if err != nil {
				return fmt.Errorf("%s: round %d: %w", v.name, round, err)
			}
			v.walls = append(v.walls, wall)
			v.procs = append(v.procs, procs)
			if o.verbose {
				e.Logf("round %d %-13s %s, %d pulumi processes, %d findings", round, v.name, benchenv.Seconds(wall), procs, findings)
			}
		}
	}
	cpuLine := benchenv.CPUSince(cpu)

	fmt.Printf("\n== policy results: %d rules x %d ConfigMaps, each up updating all of them (%d rounds, order turned each round)\n", o.rules, o.resources, o.rounds)
	fmt.Printf("%-14s %-40s %10s %8s  %s\n", "variant", "ups (runner wall, start to exit)", "median", "procs", "overhead vs plain (median)")
	base := median(variants[0].walls)
	for _, v := range variants {
		var walls []string
		for _, w := range v.walls {
			walls = append(walls, benchenv.Seconds(w))
		}
		m := median(v.walls)
		over := "-"
		if v != variants[0] {
			over = fmt.Sprintf("%+.1f %%", 100*(m.Seconds()-base.Seconds())/base.Seconds())
		}
		fmt.Printf("%-14s %-40s %10s %8d  %s\n", v.name, strings.Join(walls, " "), benchenv.Seconds(m), v.procs[len(v.procs)-1], over)
	}
	fmt.Printf("target: rules at most +5 %% (the analyzer inside the engine); rules+delete saves and applies an update plan, one preview more.\n")
	fmt.Println(cpuLine)
	fmt.Printf("load average at the end: %s; other processes now: %s\n", benchenv.LoadAvg(), benchenv.OtherProcesses())
	return nil
}

// rules are n rules over every ConfigMap, all compliant, of the kinds
// policies hold: a field compared, a label looked up, a name matched, a
// list searched.
func rules(n int) []policy.Rule {
	out := make([]policy.Rule, 0, n)
	for i := range n {
		r := policy.Rule{Name: fmt.Sprintf("rule-%03d", i), Match: policy.Match{Types: []string{"kubernetes:core/v1:*"}}}
		if i%2 == 1 {
			r.Enforcement = policy.Advisory
		}
		switch i % 4 {
		case 0:
			r.Expression = fmt.Sprintf("resource.inputs.data.run != 'forbidden-%d'", i)
		case 1:
			r.Expression = "has(resource.inputs.metadata.labels) && resource.inputs.metadata.labels.owner == 'bench'"
		case 2:
			r.Expression = fmt.Sprintf("resource.name.startsWith('cm-') && !resource.name.endsWith('-x%d')", i)
		case 3:
			r.Expression = fmt.Sprintf("!(%q in resource.inputs.data)", fmt.Sprintf("secret-%d", i))
		}
		r.MessageExpression = fmt.Sprintf("'rule %d: ' + resource.name", i)
		out = append(out, r)
	}
	return out
}

// program is n ConfigMaps named <prefix>-NNN with data.run from config.
func program(prefix string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: policybench\nruntime: yaml\nconfig:\n  namespace:\n    type: string\n  run:\n    type: string\nresources:\n")
	for i := range n {
		fmt.Fprintf(&b, `  cm-%03d:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: %s-%03d
        namespace: ${namespace}
        labels:
          owner: bench
      data:
        run: ${run}
        keep: "false"
`, i, prefix, i)
	}
	return b.String()
}

// up runs one up of v's stack with data.run = round and returns the runner
// process's wall time, the pulumi processes it started and the findings.
func up(ctx context.Context, e *benchenv.Env, o options, v *variant, round int) (time.Duration, int, int, error) {
	opDir := filepath.Join(e.Tmp, "ops", fmt.Sprintf("%s-%02d", v.name, round))
	work := filepath.Join(opDir, "program")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return 0, 0, 0, err
	}
	if err := os.WriteFile(filepath.Join(work, "Pulumi.yaml"), []byte(program(strings.ReplaceAll(v.name, "+", "-"), o.resources)), 0o644); err != nil {
		return 0, 0, 0, err
	}
	spec := runner.Spec{
		APIVersion: runner.APIVersion, ID: fmt.Sprintf("bench-%s-%02d", strings.ReplaceAll(v.name, "+", "-"), round), Type: runner.OpUp,
		WorkDir: work, StackName: "bench", Backend: "file://" + filepath.Join(e.Tmp, "state", strings.ReplaceAll(v.name, "+", "-")),
		PulumiHome: filepath.Join(e.Tmp, "pulumi-home"), PulumiCommand: filepath.Join(e.Bin, "pulumi"),
		Config: []runner.ConfigValue{
			{Key: "namespace", Value: namespace},
			{Key: "run", Value: fmt.Sprintf("run-%d", round)},
			{Key: "kubernetes:enableConfigMapMutable", Value: true},
		},
		Env:     map[string]string{"PULUMI_CONFIG_PASSPHRASE": benchenv.Passphrase},
		Policy:  v.policy,
		Timeout: runner.Duration(o.timeout),
	}
	specPath, resultPath := filepath.Join(opDir, "spec.json"), filepath.Join(opDir, "result.json")
	if err := runner.WriteSpec(specPath, spec); err != nil {
		return 0, 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.ControllerBin, "runner", "--spec", specPath, "--result", resultPath)
	cmd.Env = e.PulumiEnv()
	logPath := filepath.Join(opDir, "runner.log")
	log, err := os.Create(logPath)
	if err != nil {
		return 0, 0, 0, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, 0, fmt.Errorf("runner: %v (log %s)", err, logPath)
	}
	wall := time.Since(start)
	res, err := runner.ReadResult(resultPath)
	if err != nil {
		return 0, 0, 0, err
	}
	if res.Outcome != runner.OutcomeSucceeded {
		return 0, 0, 0, fmt.Errorf("outcome %s (%s): %s (runner log %s)", res.Outcome, res.ErrorClass, res.Message, logPath)
	}
	want := o.resources
	if round == 0 {
		want = 0
	}
	if res.Changes.Update != want {
		return 0, 0, 0, fmt.Errorf("%d updates, want %d: the up did not change every ConfigMap", res.Changes.Update, want)
	}
	return wall, res.PulumiProcesses, len(res.Policy), nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
