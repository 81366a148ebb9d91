package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func (c *cli) newStatusCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "status STACK",
		Aliases: []string{"describe"},
		Short:   "Show a Stack's state: conditions, revisions, operations, outputs, plan, drift, policy",
		Long: `Prints what the Stack's status says, the way a person reads it: its
conditions, the source and the revisions attempted and applied, the inputs
digest, the operation running now, the last 10 operations with their change
counts, the outputs (secret ones as [secret]: see ` + "`stackpilot outputs --show-secrets`" + `),
and the pending plan, the drift found and the policy findings of the last
up or preview, when there are.

-o json|yaml prints the same report as data.`,
		Example: `  stackpilot status web -n infra
  stackpilot describe web -n infra
  stackpilot status web -o json | jq .history[0]`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := planFormat(output)
			if err != nil {
				return err
			}
			return c.withStack(args[0], func(_ context.Context, _ *stackGetter, s *v1alpha1.Stack) error {
				r := newStatusReport(s)
				if format != "text" {
					return writeStructured(c.stdout, format, r)
				}
				return writeStatus(c.stdout, r, time.Now())
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text, json or yaml.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// statusReport is what `status` prints, in every format.
type statusReport struct {
	Namespace          string                      `json:"namespace"`
	Name               string                      `json:"name"`
	Created            metav1.Time                 `json:"created"`
	Generation         int64                       `json:"generation"`
	ObservedGeneration int64                       `json:"observedGeneration"`
	Suspended          bool                        `json:"suspended"`
	Source             string                      `json:"source"`
	StackName          string                      `json:"stackName"`
	Backend            string                      `json:"backend,omitempty"`
	Conditions         []metav1.Condition          `json:"conditions"`
	AttemptedRevision  string                      `json:"lastAttemptedRevision,omitempty"`
	AppliedRevision    string                      `json:"lastAppliedRevision,omitempty"`
	InputsDigest       string                      `json:"inputsDigest,omitempty"`
	Failures           int64                       `json:"failures,omitempty"`
	CurrentOperation   *v1alpha1.OperationRecord   `json:"currentOperation,omitempty"`
	History            []v1alpha1.OperationRecord  `json:"history"`
	Outputs            map[string]string           `json:"outputs"`
	OutputsOmitted     int64                       `json:"outputsOmitted,omitempty"`
	PendingPlan        *planSummary                `json:"pendingPlan,omitempty"`
	Drift              *driftSummary               `json:"drift,omitempty"`
	Policy             *v1alpha1.StackPolicyStatus `json:"policy,omitempty"`
}

// planSummary is status.pendingPlan without its resource list (`stackpilot
// plan` prints that).
type planSummary struct {
	ID        string                 `json:"id"`
	Revision  string                 `json:"revision"`
	CreatedAt metav1.Time            `json:"createdAt"`
	Changes   v1alpha1.ChangeSummary `json:"changes"`
	Total     int64                  `json:"total"`
}

// driftSummary is status.drift without its resource list (`stackpilot
// drift show` prints that).
type driftSummary struct {
	CheckedAt   *metav1.Time `json:"checkedAt,omitempty"`
	NextCheckAt *metav1.Time `json:"nextCheckAt,omitempty"`
	Revision    string       `json:"revision,omitempty"`
	Total       int64        `json:"total"`
}

func newStatusReport(s *v1alpha1.Stack) statusReport {
	st := s.Status
	r := statusReport{
		Namespace: s.Namespace, Name: s.Name, Created: s.CreationTimestamp,
		Generation: s.Generation, ObservedGeneration: st.ObservedGeneration, Suspended: s.Spec.Suspend,
		Source: sourceLine(s.Spec.Source), StackName: s.GetStackName(), Backend: s.Spec.Backend,
		Conditions: append([]metav1.Condition{}, st.Conditions...), AttemptedRevision: st.LastAttemptedRevision,
		AppliedRevision: st.LastAppliedRevision, InputsDigest: st.InputsDigest, Failures: st.Failures,
		CurrentOperation: st.CurrentOperation, History: append([]v1alpha1.OperationRecord{}, st.History...),
		Outputs: map[string]string{}, OutputsOmitted: st.OutputsOmitted,
	}
	if a := st.AppliedStack; a != nil {
		r.StackName, r.Backend = a.StackName, a.Backend
	}
	// Ready first, then the others by type: the order a reader looks in.
	sort.SliceStable(r.Conditions, func(i, j int) bool {
		a, b := r.Conditions[i].Type == v1alpha1.ReadyCondition, r.Conditions[j].Type == v1alpha1.ReadyCondition
		if a != b {
			return a
		}
		return r.Conditions[i].Type < r.Conditions[j].Type
	})
	for k, v := range st.Outputs {
		r.Outputs[k] = v
	}
	if len(r.History) > v1alpha1.MaxHistory {
		r.History = r.History[:v1alpha1.MaxHistory]
	}
	if p := st.PendingPlan; p != nil {
		r.PendingPlan = &planSummary{ID: p.ID, Revision: p.Revision, CreatedAt: p.CreatedAt, Changes: p.Changes, Total: max(p.Total, int64(len(p.Resources)))}
	}
	if d := st.Drift; d != nil {
		r.Drift = &driftSummary{CheckedAt: d.CheckedAt, NextCheckAt: d.NextCheckAt, Revision: d.Revision, Total: d.Total}
	}
	r.Policy = st.Policy
	return r
}

// sourceLine says where the program comes from, in one line.
func sourceLine(src v1alpha1.StackSource) string {
	var s string
	switch {
	case src.Git != nil:
		s = "git " + src.Git.URL
		if ref := src.Git.Ref; ref != nil {
			for _, kv := range [][2]string{{"branch", ref.Branch}, {"tag", ref.Tag}, {"semver", ref.SemVer}, {"commit", ref.Commit}} {
				if kv[1] != "" {
					s += fmt.Sprintf(" (%s %s)", kv[0], kv[1])
				}
			}
		}
	case src.OCI != nil:
		s = "oci " + src.OCI.URL
		if ref := src.OCI.Ref; ref != nil {
			for _, kv := range [][2]string{{"tag", ref.Tag}, {"semver", ref.SemVer}, {"digest", ref.Digest}} {
				if kv[1] != "" {
					s += fmt.Sprintf(" (%s %s)", kv[0], kv[1])
				}
			}
		}
	case src.SourceRef != nil:
		ns := ""
		if src.SourceRef.Namespace != "" {
			ns = src.SourceRef.Namespace + "/"
		}
		s = fmt.Sprintf("%s %s%s", src.SourceRef.Kind, ns, src.SourceRef.Name)
	default:
		s = "none"
	}
	if src.Dir != "" {
		s += ", dir " + src.Dir
	}
	return s
}

func writeStatus(w io.Writer, r statusReport, now time.Time) error {
	field := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-15s%s\n", label+":", fmt.Sprintf(format, args...))
	}
	field("Stack", "%s/%s", r.Namespace, r.Name)
	ready := "Unknown (no Ready condition yet: is the controller running?)"
	for _, c := range r.Conditions {
		if c.Type == v1alpha1.ReadyCondition {
			ready = conditionText(c)
		}
	}
	field("Ready", "%s", ready)
	field("Suspended", "%t", r.Suspended)
	field("Created", "%s", stamp(&r.Created, now))
	if r.ObservedGeneration != r.Generation {
		field("Generation", "%d, the controller has seen %d: it has not acted on the latest spec yet", r.Generation, r.ObservedGeneration)
	}
	field("Source", "%s", r.Source)
	stack := r.StackName
	if r.Backend != "" {
		stack += " (backend " + r.Backend + ")"
	}
	field("Pulumi stack", "%s", stack)
	field("Applied", "%s", orDash(r.AppliedRevision))
	if r.AttemptedRevision != "" && r.AttemptedRevision != r.AppliedRevision {
		field("Attempted", "%s", r.AttemptedRevision)
	}
	field("Inputs digest", "%s", orDash(r.InputsDigest))
	if r.Failures > 0 {
		field("Failures", "%d in a row", r.Failures)
	}

	fmt.Fprintln(w, "\nConditions:")
	if len(r.Conditions) == 0 {
		fmt.Fprintln(w, "  none yet")
	} else {
		t := newTable(indent{w}, "TYPE", "STATUS", "REASON", "SINCE", "MESSAGE")
		for _, c := range r.Conditions {
			t.row(c.Type, string(c.Status), c.Reason, age(c.LastTransitionTime.Time, now), c.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	if op := r.CurrentOperation; op != nil {
		fmt.Fprintf(w, "\nRunning now:   %s %s at %s, started %s", op.Type, op.ID, orDash(op.Revision), ago(op.StartedAt.Time, now))
		if op.Changes != nil {
			fmt.Fprintf(w, " (%s so far)", changeCounts(op.Changes))
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "\nOperations (last %d, newest first):\n", v1alpha1.MaxHistory)
	if len(r.History) == 0 {
		fmt.Fprintln(w, "  none yet")
	} else if err := writeOperations(indent{w}, r.History, now); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nOutputs:")
	if len(r.Outputs) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		t := newTable(indent{w}, "NAME", "VALUE")
		for _, o := range outputsText(r.Outputs) {
			t.row(o.name, o.text)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if r.OutputsOmitted > 0 {
			fmt.Fprintf(w, "  ... and %d more in the outputs Secret/ConfigMap (stackpilot outputs %s -n %s)\n", r.OutputsOmitted, r.Name, r.Namespace)
		}
	}

	if p := r.PendingPlan; p != nil {
		fmt.Fprintf(w, "\nPending plan:  %s at %s, made %s: %s (%d resource(s)); see `stackpilot plan %s -n %s`\n",
			p.ID, p.Revision, ago(p.CreatedAt.Time, now), changesLine(p.Changes), p.Total, r.Name, r.Namespace)
	}
	if d := r.Drift; d != nil && d.CheckedAt != nil {
		found := "no drift"
		if d.Total > 0 {
			found = fmt.Sprintf("%d drifted resource(s); see `stackpilot drift show %s -n %s`", d.Total, r.Name, r.Namespace)
		}
		fmt.Fprintf(w, "\nDrift:         checked %s at %s: %s\n", ago(d.CheckedAt.Time, now), orDash(d.Revision), found)
	}
	return writePolicy(w, r.Policy)
}

// writePolicy prints what the policies found at the last up or preview:
// the policies, then each finding, mandatory first.
func writePolicy(w io.Writer, p *v1alpha1.StackPolicyStatus) error {
	if p == nil {
		return nil
	}
	mandatory, advisory := 0, 0
	for _, v := range p.Violations {
		if v.Enforcement == v1alpha1.EnforcementMandatory {
			mandatory++
		} else {
			advisory++
		}
	}
	found := "nothing found"
	if len(p.Violations) > 0 {
		found = fmt.Sprintf("%d mandatory, %d advisory finding(s)", mandatory, advisory)
	}
	fmt.Fprintf(w, "\nPolicies:      %s at %s: %s\n", strings.Join(p.Policies, ", "), orDash(p.OperationID), found)
	if len(p.Violations) == 0 {
		return nil
	}
	t := newTable(indent{w}, "ENFORCEMENT", "RULE", "RESOURCE", "MESSAGE")
	for _, v := range p.Violations {
		t.row(v.Enforcement, v.Policy, orDash(v.URN), shorten(oneLine(v.Message), statusWidth))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if p.More > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", p.More)
	}
	return nil
}

// conditionText is "True (Succeeded): message".
func conditionText(c metav1.Condition) string {
	s := fmt.Sprintf("%s (%s)", c.Status, c.Reason)
	if c.Message != "" {
		s += ": " + oneLine(c.Message)
	}
	return s
}

// writeOperations is the operations table of `status` and `history`, in
// the order given.
func writeOperations(w io.Writer, ops []v1alpha1.OperationRecord, now time.Time) error {
	t := newTable(w, "ID", "TYPE", "REVISION", "OUTCOME", "CHANGES", "STARTED", "DURATION", "MESSAGE")
	for _, op := range ops {
		msg := op.Message
		if op.Reason != "" && msg != "" {
			msg = op.Reason + ": " + msg
		} else if op.Reason != "" {
			msg = op.Reason
		}
		t.row(op.ID, string(op.Type), shortRevision(op.Revision), string(op.Outcome), changeCounts(op.Changes),
			ago(op.StartedAt.Time, now), opDuration(op), shorten(msg, statusWidth))
	}
	return t.flush()
}

// changeCounts is a change summary the way pulumi marks steps: "+3 ~1 -2
// +-1", only the steps taken; "none" for no change, "-" when not counted.
func changeCounts(c *v1alpha1.ChangeSummary) string {
	if c == nil {
		return "-"
	}
	var parts []string
	for _, k := range []struct {
		mark string
		n    int64
	}{{"+", c.Create}, {"~", c.Update}, {"-", c.Delete}, {"+-", c.Replace}} {
		if k.n > 0 {
			parts = append(parts, fmt.Sprintf("%s%d", k.mark, k.n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// opDuration is how long the operation took, to the second, or "running".
func opDuration(op v1alpha1.OperationRecord) string {
	if op.FinishedAt == nil {
		return "running"
	}
	return op.FinishedAt.Sub(op.StartedAt.Time).Round(time.Second).String()
}

// indent writes each line two spaces in, for tables under a heading.
type indent struct{ w io.Writer }

func (i indent) Write(p []byte) (int, error) {
	lines := strings.SplitAfter(string(p), "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString("  " + l)
		}
	}
	if _, err := io.WriteString(i.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
