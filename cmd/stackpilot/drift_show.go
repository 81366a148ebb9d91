package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func (c *cli) newDriftShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show STACK",
		Short: "Show what the Stack's last drift check found",
		Long: `Prints status.drift of the Stack: when it was checked and at which revision,
when the next scheduled check is due, the number of drifted resources and one
line per resource (name, type, op, the paths of the drifted properties, never
their values), with the Drifted condition's message. Exits 0 whatever the
check found; ` + "`drift check`" + ` is the one whose exit code says "drifted".`,
		Example: `  stackpilot drift show web -n infra
  stackpilot drift show web -o json`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			return c.withStack(args[0], func(_ context.Context, _ *stackGetter, s *v1alpha1.Stack) error {
				return writeDriftReport(c.stdout, format, newDriftReport(s), time.Now())
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// driftReport is what `drift show` and `drift check` print, in every format.
type driftReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Mode and Interval are the effective spec.driftDetection, defaults applied.
	Mode     v1alpha1.DriftMode `json:"mode"`
	Interval string             `json:"interval"`
	// Applied is false until something was applied: no check runs before.
	Applied     bool                       `json:"applied"`
	CheckedAt   *metav1.Time               `json:"checkedAt,omitempty"`
	NextCheckAt *metav1.Time               `json:"nextCheckAt,omitempty"`
	Revision    string                     `json:"revision,omitempty"`
	Total       int64                      `json:"total"`
	Resources   []v1alpha1.DriftedResource `json:"resources"`
	Condition   *driftCondition            `json:"condition,omitempty"`
}

// driftCondition is the Drifted condition, without its bookkeeping.
type driftCondition struct {
	Status  metav1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message,omitempty"`
}

func newDriftReport(s *v1alpha1.Stack) driftReport {
	r := driftReport{
		Namespace: s.Namespace,
		Name:      s.Name,
		Mode:      s.GetDriftMode(),
		Interval:  s.GetDriftInterval().String(),
		Applied:   s.Status.LastAppliedRevision != "" || s.Status.LastAppliedArtifact != nil,
		Resources: []v1alpha1.DriftedResource{},
	}
	if d := s.Status.Drift; d != nil {
		r.CheckedAt, r.NextCheckAt, r.Revision, r.Total = d.CheckedAt, d.NextCheckAt, d.Revision, d.Total
		if d.Resources != nil {
			r.Resources = d.Resources
		}
	}
	if cond := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.DriftedCondition); cond != nil {
		r.Condition = &driftCondition{Status: cond.Status, Reason: cond.Reason, Message: cond.Message}
	}
	return r
}

// drifted is what `drift check` exits 3 on: the condition says drift now.
func (r driftReport) drifted() bool {
	return r.Condition != nil && r.Condition.Status == metav1.ConditionTrue
}

func writeDriftReport(w io.Writer, format string, r driftReport, now time.Time) error {
	if format != "table" {
		return writeStructured(w, format, r)
	}
	field := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-13s%s\n", label+":", fmt.Sprintf(format, args...))
	}
	field("Stack", "%s/%s (mode %s, every %s)", r.Namespace, r.Name, r.Mode, r.Interval)
	if r.CheckedAt == nil {
		field("Drift", "no drift check yet%s", noCheckWhy(r))
		if r.NextCheckAt != nil {
			field("Next check", "%s", stamp(r.NextCheckAt, now))
		}
		if r.Condition != nil && r.Condition.Status == metav1.ConditionUnknown {
			field("Drifted", "%s", conditionLine(r.Condition))
		}
		return nil
	}
	if r.Condition != nil {
		field("Drifted", "%s", conditionLine(r.Condition))
	}
	field("Checked at", "%s", stamp(r.CheckedAt, now))
	field("Revision", "%s", orDash(r.Revision))
	if r.NextCheckAt != nil {
		field("Next check", "%s", stamp(r.NextCheckAt, now))
	} else if r.Mode == v1alpha1.DriftDisabled {
		field("Next check", "none scheduled (mode Disabled)")
	}
	field("Total", "%d drifted resource(s)", r.Total)
	if len(r.Resources) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tOP\tPROPERTIES")
	for _, res := range r.Resources {
		props := "-"
		if len(res.Properties) > 0 {
			props = strings.Join(res.Properties, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", resourceName(res), orDash(res.Type), res.Op, props)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more := r.Total - int64(len(r.Resources)); more > 0 {
		fmt.Fprintf(w, "... and %d more (status lists the first %d)\n", more, v1alpha1.MaxDriftResources)
	}
	return nil
}

// noCheckWhy says why there is no report yet, when the Stack tells.
func noCheckWhy(r driftReport) string {
	switch {
	case !r.Applied:
		return " (nothing applied yet: checks start after the first apply)"
	case r.Mode == v1alpha1.DriftDisabled:
		return fmt.Sprintf(" (mode Disabled: run `stackpilot drift check %s -n %s` for one now)", r.Name, r.Namespace)
	}
	return ""
}

func conditionLine(c *driftCondition) string {
	s := fmt.Sprintf("%s (%s)", c.Status, c.Reason)
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

// resourceName is the logical name, from the URN when the record lacks it.
func resourceName(r v1alpha1.DriftedResource) string {
	if r.Name != "" {
		return r.Name
	}
	if i := strings.LastIndex(r.URN, "::"); i >= 0 {
		return r.URN[i+2:]
	}
	return orDash(r.URN)
}

// stamp is an RFC 3339 time with how far it is from now ("3m ago", "in 57m").
func stamp(t *metav1.Time, now time.Time) string {
	d := t.Sub(now)
	when := "in " + roughDuration(d)
	if d < 0 {
		when = roughDuration(-d) + " ago"
	}
	return fmt.Sprintf("%s (%s)", t.UTC().Format(time.RFC3339), when)
}

// roughDuration is d to the second under a minute, else to the minute.
func roughDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	s := d.Round(time.Minute).String()
	return strings.TrimSuffix(s, "0s")
}
