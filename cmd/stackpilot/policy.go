package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	controllerpolicy "github.com/stackpilot/stackpilot/internal/controllers/policy"
	"github.com/stackpilot/stackpilot/internal/policy"
)

type policyTestOptions struct {
	files  []string
	plan   string
	state  string
	stack  string
	labels map[string]string
	output string
	// controller is the way to the pending plan (--stack without --plan).
	controller controllerOptions
}

func (c *cli) newPolicyCmd() *cobra.Command {
	cmd := groupCmd("policy", "Try StackPolicy and ClusterStackPolicy rules before applying them",
		"Evaluate StackPolicy and ClusterStackPolicy rules offline, as the controller would.")
	cmd.AddCommand(c.newPolicyTestCmd())
	return cmd
}

func (c *cli) newPolicyTestCmd() *cobra.Command {
	opts := policyTestOptions{output: "text"}
	cmd := &cobra.Command{
		Use:   "test -f POLICY.yaml (--plan FILE | --stack NAME)",
		Short: "Evaluate policy rules against a saved Pulumi update plan or a Stack's pending plan; exit 3 on a mandatory violation",
		Long: `Reads StackPolicy and ClusterStackPolicy documents (-f, as many as you like,
"-" for stdin; several documents to a file) and an update plan, and
evaluates every rule on every change the plan holds, the way the controller
does in an up: creates, updates, replaces and unchanged resources by the
rules that match them, deletes by the rules that list delete. No selector
is applied: every rule of every policy given is evaluated.

The plan is either a file (--plan), the one ` + "`pulumi preview --save-plan FILE`" + `
writes, and then nothing is read from the cluster; or the pending plan of
a Stack (--stack without --plan: spec.approval.mode Manual or PreviewOnly),
read from the controller as ` + "`stackpilot plan`" + ` reads it (the same flags, the
same need: get on the Stack), with the inputs of the stack's resources as
they were when the plan was made. Rules then read the Stack's namespace,
name and labels.

A plan holds only the inputs a change sets; with --plan give --state (the
output of ` + "`pulumi stack export`" + `, with --show-secrets or not) for the inputs as
they are, which rules read as resource.oldInputs, and which make up an
update's unchanged inputs. Secrets are unknown to rules (a pending plan's
are masked before they leave the controller; a file's stay encrypted): a
verdict that depends on one is "undetermined".

Exit codes:
  0  no mandatory rule is violated (advisory and undetermined findings are printed)
  1  error: a policy does not compile (each broken rule is printed with its position), a file cannot be read,
     the Stack has no pending plan or the controller does not serve it
  2  usage error
  3  a mandatory rule is violated, or could not be evaluated`,
		Example: `  stackpilot policy test -f guardrails.yaml --stack web -n infra
  pulumi preview --save-plan plan.json
  stackpilot policy test -f guardrails.yaml --plan plan.json
  pulumi stack export > state.json
  stackpilot policy test -f org.yaml -f team.yaml --plan plan.json --state state.json -o json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(opts.files) == 0 {
				return usageErrorf("policy test needs -f with the policies to test")
			}
			if opts.plan == "" && opts.stack == "" {
				return usageErrorf("policy test needs --plan FILE (what `pulumi preview --save-plan` writes) or --stack NAME (a Stack with a pending plan)")
			}
			if opts.plan == "" && len(opts.labels) > 0 {
				return usageErrorf("--stack-labels goes with --plan: a Stack's own labels are read with its plan")
			}
			if _, err := opts.controller.check(); err != nil {
				return err
			}
			if opts.output != "text" && opts.output != "json" {
				return usageErrorf("-o %q: want text or json", opts.output)
			}
			return c.policyTest(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringArrayVarP(&opts.files, "filename", "f", nil, "A file of StackPolicy and ClusterStackPolicy documents, or - for stdin (repeatable).")
	cmd.Flags().StringVar(&opts.plan, "plan", "", "The Pulumi update plan to test (pulumi preview --save-plan FILE).")
	cmd.Flags().StringVar(&opts.state, "state", "", "The stack's state as pulumi stack export prints it: the inputs before the change.")
	cmd.Flags().StringVar(&opts.stack, "stack", "", "Without --plan: the Stack (in -n's namespace) whose pending plan is tested. With --plan: what rules read as stack.namespace and stack.name, as NAMESPACE/NAME.")
	cmd.Flags().StringToStringVar(&opts.labels, "stack-labels", nil, "With --plan: what rules read as stack.labels, as key=value pairs.")
	cmd.Flags().StringVarP(&opts.output, "output", "o", opts.output, "Output format: text or json.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("plan", "json")
	_ = cmd.MarkFlagFilename("state", "json")
	_ = cmd.RegisterFlagCompletionFunc("stack", c.completeStacks)
	opts.controller.addFlags(cmd.Flags(), "the pending plan (with --stack)")
	return cmd
}

// policyTestReport is what `policy test -o json` prints.
type policyTestReport struct {
	// Policies are the policies evaluated, as <kind>/<id>.
	Policies []string `json:"policies"`
	// Changes counts the plan's changes by operation.
	Changes map[string]int `json:"changes"`
	// Findings are the rules' verdicts other than compliance, in plan
	// order.
	Findings  []policyTestFinding `json:"findings"`
	Mandatory int                 `json:"mandatory"`
	Advisory  int                 `json:"advisory"`
}

type policyTestFinding struct {
	// Policy is <kind>/<policy>/<rule>, as the Stack's status says.
	Policy string `json:"policy"`
	// Enforcement is mandatory (the controller would stop) or advisory.
	Enforcement string `json:"enforcement"`
	// Outcome is violated, failed or undetermined.
	Outcome string `json:"outcome"`
	URN     string `json:"urn"`
	Op      string `json:"op"`
	Message string `json:"message"`
}

func (c *cli) policyTest(ctx context.Context, opts policyTestOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	policies, err := c.readPolicies(opts.files)
	if err != nil {
		return err
	}
	var compiled []*policy.Compiled
	var broken []string
	for _, p := range policies {
		cp, err := policy.Compile(p)
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		compiled = append(compiled, cp)
	}
	if len(broken) > 0 {
		return &exitError{code: 1, msg: "policies that do not compile (nothing was evaluated):\n  " + strings.Join(broken, "\n  ")}
	}
	var changes []policy.Resource
	var stack policy.Stack
	if opts.plan != "" {
		changes, stack, err = planFileChanges(opts)
	} else {
		changes, stack, err = c.pendingPlanChanges(opts)
	}
	if err != nil {
		return err
	}
	report := policyTestReport{Changes: map[string]int{}, Findings: []policyTestFinding{}}
	for _, cp := range compiled {
		report.Policies = append(report.Policies, cp.Policy.String())
	}
	for _, ch := range changes {
		report.Changes[ch.Op]++
		for _, cp := range compiled {
			for _, f := range cp.Evaluate(ctx, stack, ch) {
				// As in an up: every input is known there, so an
				// undetermined mandatory rule would block.
				level := f.Level(false)
				if level == policy.Mandatory {
					report.Mandatory++
				} else {
					report.Advisory++
				}
				report.Findings = append(report.Findings, policyTestFinding{Policy: cp.Policy.RuleName(f.Rule),
					Enforcement: string(level), Outcome: string(f.Outcome), URN: f.URN, Op: f.Op, Message: f.Message})
			}
		}
	}
	if opts.output == "json" {
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, string(b))
	} else {
		printPolicyTest(c.stdout, report, len(changes))
	}
	if report.Mandatory > 0 {
		return &exitError{code: 3}
	}
	return nil
}

// planFileChanges are the changes of --plan, read with --state, and the
// Stack --stack and --stack-labels describe.
func planFileChanges(opts policyTestOptions) ([]policy.Resource, policy.Stack, error) {
	stack := policy.Stack{Labels: opts.labels}
	if opts.stack != "" {
		ns, name, ok := strings.Cut(opts.stack, "/")
		if !ok || ns == "" || name == "" {
			return nil, stack, usageErrorf("--stack %q: with --plan, want NAMESPACE/NAME", opts.stack)
		}
		stack.Namespace, stack.Name = ns, name
	}
	prior, err := readStateInputs(opts.state)
	if err != nil {
		return nil, stack, err
	}
	data, err := os.ReadFile(opts.plan)
	if err != nil {
		return nil, stack, fmt.Errorf("--plan: %w", err)
	}
	changes, err := policy.PlanChanges(data, prior, nil)
	if err != nil {
		return nil, stack, fmt.Errorf("--plan %s: %w", opts.plan, err)
	}
	return changes, stack, nil
}

// pendingPlanChanges are the changes of the pending plan of the Stack
// --stack names, read from the controller with the inputs the preview kept,
// and that Stack as rules see it.
func (c *cli) pendingPlanChanges(opts policyTestOptions) ([]policy.Resource, policy.Stack, error) {
	if opts.state != "" {
		return nil, policy.Stack{}, usageErrorf("--state goes with --plan: a pending plan is read with the inputs its preview kept")
	}
	var changes []policy.Resource
	var stack policy.Stack
	err := c.withStack(opts.stack, func(ctx context.Context, _ *stackGetter, s *v1alpha1.Stack) error {
		if s.Status.PendingPlan == nil {
			// An error, not plan's exit 3: here 3 means a violation.
			err := noPendingPlan(s)
			var ee *exitError
			if errors.As(err, &ee) {
				ee.code = 1
			}
			return err
		}
		stack = policy.Stack{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels}
		ep, err := c.controllerEndpoint(opts.controller.forStack(s))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, planFetchTimeout)
		defer cancel()
		in, err := ep.fetchPolicyInput(ctx, s.Namespace, s.Name, s.Status.PendingPlan.ID)
		if err != nil {
			return fmt.Errorf("the pending plan %s of Stack %s/%s: %w", s.Status.PendingPlan.ID, s.Namespace, s.Name, err)
		}
		if in.PriorInputs == nil {
			c.warnf("plan %s was kept without the inputs of the stack's resources before it (its preview's engine log says why): an update's unchanged inputs and resource.oldInputs are unknown to rules", in.ID)
		}
		changes, err = policy.PlanChanges(in.Plan, in.PriorInputs, nil)
		if err != nil {
			return fmt.Errorf("the pending plan %s of Stack %s/%s: %w", in.ID, s.Namespace, s.Name, err)
		}
		return nil
	})
	return changes, stack, err
}

func printPolicyTest(w io.Writer, r policyTestReport, changes int) {
	for _, f := range r.Findings {
		mark := "advisory "
		if f.Enforcement == string(policy.Mandatory) {
			mark = "MANDATORY"
		}
		outcome := ""
		if f.Outcome != string(policy.Violated) {
			outcome = " (" + f.Outcome + ")"
		}
		fmt.Fprintf(w, "%s  %s %s\n           %s%s: %s\n", mark, f.Op, f.URN, f.Policy, outcome, f.Message)
	}
	var ops []string
	for _, op := range []string{"create", "update", "replace", "delete", policy.Same} {
		if n := r.Changes[op]; n > 0 {
			ops = append(ops, fmt.Sprintf("%d %s", n, op))
		}
	}
	verdict := "no mandatory rule is violated"
	if r.Mandatory > 0 {
		verdict = fmt.Sprintf("%d mandatory violation(s): the controller would refuse this change", r.Mandatory)
	}
	fmt.Fprintf(w, "%d policies, %d changes (%s): %s; %d advisory finding(s)\n",
		len(r.Policies), changes, strings.Join(ops, ", "), verdict, r.Advisory)
}

// readPolicies reads StackPolicy and ClusterStackPolicy documents (a List
// of them too) from files, "-" being stdin.
func (c *cli) readPolicies(files []string) ([]policy.Policy, error) {
	var out []policy.Policy
	for _, name := range files {
		var r io.Reader
		if name == "-" {
			r = c.stdin
		} else {
			f, err := os.Open(name)
			if err != nil {
				return nil, fmt.Errorf("-f: %w", err)
			}
			defer f.Close()
			r = f
		}
		ps, err := decodePolicies(r)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", name, err)
		}
		out = append(out, ps...)
	}
	if len(out) == 0 {
		return nil, errors.New("-f: no StackPolicy or ClusterStackPolicy in the files given")
	}
	return out, nil
}

func decodePolicies(r io.Reader) ([]policy.Policy, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []policy.Policy
	for n := 1; ; n++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		raw, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("document %d is not valid YAML: %w", n, err)
		}
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			continue
		}
		ps, err := decodePolicy(raw, n)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
}

func decodePolicy(raw []byte, n int) ([]policy.Policy, error) {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("document %d: %w", n, err)
	}
	switch {
	case head.Kind == "List" || strings.HasSuffix(head.Kind, "List"):
		var out []policy.Policy
		for _, item := range head.Items {
			ps, err := decodePolicy(item, n)
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
		}
		return out, nil
	case head.APIVersion != v1alpha1.GroupVersion.String():
		return nil, fmt.Errorf("document %d: apiVersion %q: want %s", n, head.APIVersion, v1alpha1.GroupVersion)
	case head.Kind == controllerpolicy.KindStackPolicy:
		var p v1alpha1.StackPolicy
		if err := strictJSON(raw, &p); err != nil {
			return nil, fmt.Errorf("document %d (StackPolicy): %w", n, err)
		}
		return []policy.Policy{controllerpolicy.StackPolicy(&p)}, nil
	case head.Kind == controllerpolicy.KindClusterStackPolicy:
		var p v1alpha1.ClusterStackPolicy
		if err := strictJSON(raw, &p); err != nil {
			return nil, fmt.Errorf("document %d (ClusterStackPolicy): %w", n, err)
		}
		return []policy.Policy{controllerpolicy.ClusterStackPolicy(&p)}, nil
	}
	return nil, fmt.Errorf("document %d: kind %q: want StackPolicy or ClusterStackPolicy", n, head.Kind)
}

// strictJSON decodes raw into v, refusing fields v does not have (a typo
// such as "expresion" would otherwise test nothing).
func strictJSON(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// readStateInputs reads each resource's inputs from `pulumi stack export`
// output (a versioned deployment), by URN; none without a file.
func readStateInputs(path string) (map[string]map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--state: %w", err)
	}
	var export struct {
		Deployment struct {
			Resources []struct {
				URN    string         `json:"urn"`
				Inputs map[string]any `json:"inputs"`
			} `json:"resources"`
		} `json:"deployment"`
	}
	if err := json.Unmarshal(data, &export); err != nil {
		return nil, fmt.Errorf("--state %s is not `pulumi stack export` output: %w", path, err)
	}
	out := map[string]map[string]any{}
	for _, r := range export.Deployment.Resources {
		inputs := map[string]any{}
		for k, v := range r.Inputs {
			d, err := policy.DecodeState(v, nil)
			if err != nil {
				return nil, fmt.Errorf("--state: %s input %q: %w", r.URN, k, err)
			}
			inputs[k] = d
		}
		out[r.URN] = inputs
	}
	return out, nil
}
