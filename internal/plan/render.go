package plan

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// RenderOptions change how Render prints a plan.
type RenderOptions struct {
	// Colour paints the operation symbols like `pulumi preview` does on a
	// terminal; callers decide (cmd/stackpilot/term.go), Render never looks.
	Colour bool
	// Now, when set, adds how long ago the plan was made.
	Now time.Time
	// Omitted counts resources the plan changes that d.Resources leaves out
	// (a Document rebuilt from status.pendingPlan holds the first 50).
	Omitted int64
}

// Render prints d the way `pulumi preview` prints an update: a header naming
// the stack, a Type / Name / Plan / Info table under the stack's root
// resource with one symbol per operation (+ create, ~ update, +- replace,
// - delete) and the changed property paths ("[diff: ~data.key]"), then the
// "Resources:" summary. Only names and paths are printed, never values: a
// Document holds none.
func Render(w io.Writer, d *Document, opts RenderOptions) error {
	p := &printer{w: w, colour: opts.Colour}
	p.header(d, opts.Now)
	p.table(d)
	if opts.Omitted > 0 {
		p.linef("    ... and %d more resource(s) not listed", opts.Omitted)
	}
	p.linef("")
	p.summary(d)
	return p.err
}

// printer writes lines and keeps the first write error.
type printer struct {
	w      io.Writer
	colour bool
	err    error
}

func (p *printer) linef(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func (p *printer) header(d *Document, now time.Time) {
	p.linef("Previewing update (%s)", orUnknown(d.StackName))
	p.linef("")
	p.linef("Stack:     %s/%s (approval %s)", d.Namespace, d.Name, orUnknown(string(d.Mode)))
	p.linef("Revision:  %s", orUnknown(d.Revision))
	made := ""
	if !d.CreatedAt.IsZero() {
		made = " made " + d.CreatedAt.UTC().Format(time.RFC3339)
		if !now.IsZero() {
			made += " (" + ago(now.Sub(d.CreatedAt)) + ")"
		}
	}
	p.linef("Plan:      %s%s", d.ID, made)
	p.linef("")
}

// row is one line of the table, before padding.
type row struct {
	op                    string
	typ, name, plan, info string
}

func (p *printer) table(d *Document) {
	rows := []row{{typ: "Type", name: "Name", plan: "Plan", info: "Info"}}
	// Pulumi lists the stack's root resource first, every other resource
	// beneath it; a plan holds only changed resources, so the root is shown
	// without an operation unless the plan changes it.
	root := row{typ: rootType, name: rootName(d)}
	children := make([]v1alpha1.PlannedResource, 0, len(d.Resources))
	for _, r := range d.Resources {
		if isDefaultProvider(r) {
			// Pulumi leaves the providers it makes itself out of its
			// display and its counts: they are no change of the program's.
			continue
		}
		if urnType(r) == rootType {
			root.op, root.plan, root.info = r.Op, r.Op, diffInfo(r)
			continue
		}
		children = append(children, r)
	}
	rows = append(rows, root)
	for i, r := range children {
		branch := "├─ "
		if i == len(children)-1 {
			branch = "└─ "
		}
		rows = append(rows, row{op: r.Op, typ: branch + urnType(r), name: urnName(r), plan: r.Op, info: diffInfo(r)})
	}
	var wt, wn, wp int
	for _, r := range rows {
		wt, wn, wp = max(wt, width(r.typ)), max(wn, width(r.name)), max(wp, width(r.plan))
	}
	for i, r := range rows {
		sym := fmt.Sprintf(" %-2s  ", Symbol(r.op))
		line := sym + pad(r.typ, wt) + "  " + pad(r.name, wn) + "  "
		if r.info == "" && i > 0 {
			line += r.plan
		} else {
			line += pad(r.plan, wp) + "  " + r.info
		}
		line = strings.TrimRight(line, " ")
		if i > 0 && r.op != "" {
			line = p.paint(r.op, line)
		}
		p.linef("%s", line)
	}
}

// summary is Pulumi's "Resources:" block: one line per kind of change, then
// the number of changes and of unchanged resources.
func (p *printer) summary(d *Document) {
	p.linef("Resources:")
	c := d.Changes
	var total int64
	for _, k := range []struct {
		op string
		n  int64
	}{{"create", c.Create}, {"update", c.Update}, {"delete", c.Delete}, {"replace", c.Replace}} {
		if k.n == 0 {
			continue
		}
		total += k.n
		p.linef("%s", p.paint(k.op, fmt.Sprintf("    %-2s%d to %s", Symbol(k.op), k.n, k.op)))
	}
	switch {
	case total == 0:
		p.linef("    %d unchanged", d.Same)
	case d.Same > 0:
		p.linef("    %d %s. %d unchanged", total, plural(total, "change", "changes"), d.Same)
	default:
		p.linef("    %d %s", total, plural(total, "change", "changes"))
	}
}

// Symbol is the mark `pulumi preview` puts before a resource for op.
func Symbol(op string) string {
	switch op {
	case "create":
		return "+"
	case "update":
		return "~"
	case "replace", "create-replacement", "delete-replaced":
		return "+-"
	case "delete":
		return "-"
	case "import":
		return "="
	case "read":
		return ">"
	}
	return ""
}

// paint colours s as Pulumi colours op: create green, update yellow, delete
// red, replace magenta.
func (p *printer) paint(op, s string) string {
	if !p.colour {
		return s
	}
	code := map[string]string{"create": "32", "update": "33", "delete": "31", "replace": "35", "import": "36"}[op]
	if code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// diffInfo is Pulumi's Info column for a change: the changed property paths.
func diffInfo(r v1alpha1.PlannedResource) string {
	if len(r.Properties) == 0 || r.Op == "create" || r.Op == "delete" {
		return ""
	}
	return "[diff: ~" + strings.Join(r.Properties, ",") + "]"
}

const rootType = "pulumi:pulumi:Stack"

// rootName is the stack resource's name, "<project>-<stack>" as Pulumi
// names it, from any resource's URN (urn:pulumi:<stack>::<project>::...).
func rootName(d *Document) string {
	for _, r := range d.Resources {
		parts := strings.SplitN(strings.TrimPrefix(r.URN, "urn:pulumi:"), "::", 3)
		if len(parts) == 3 {
			return parts[1] + "-" + parts[0]
		}
	}
	return d.StackName
}

// urnType is the resource's own type: the record's, else the URN's last
// type (a component's child has "parent$child" there).
func urnType(r v1alpha1.PlannedResource) string {
	if r.Type != "" {
		return r.Type
	}
	parts := strings.Split(r.URN, "::")
	if len(parts) < 4 {
		return "?"
	}
	t := parts[len(parts)-2]
	if i := strings.LastIndex(t, "$"); i >= 0 {
		t = t[i+1:]
	}
	return t
}

// isDefaultProvider: a provider the engine registered itself ("default",
// "default_4_18_0"), not one the program declares.
func isDefaultProvider(r v1alpha1.PlannedResource) bool {
	return strings.HasPrefix(urnType(r), "pulumi:providers:") && strings.HasPrefix(urnName(r), "default")
}

// urnName is the resource's logical name, the URN's last part.
func urnName(r v1alpha1.PlannedResource) string {
	if i := strings.LastIndex(r.URN, "::"); i >= 0 {
		return r.URN[i+2:]
	}
	return r.URN
}

func width(s string) int { return utf8.RuneCountInString(s) }

func pad(s string, n int) string {
	return s + strings.Repeat(" ", max(0, n-width(s)))
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// ago is d to the second under a minute, to the minute under a day, else
// to the hour.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return d.Round(time.Second).String() + " ago"
	case d < 24*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s") + " ago"
	}
	return strings.TrimSuffix(d.Round(time.Hour).String(), "0m0s") + " ago"
}

// FromPendingPlan rebuilds what a Document can hold from s's
// status.pendingPlan, for when the controller cannot be asked: the first
// MaxPlanResources resources only, and no count of unchanged resources.
// It returns the Document and how many resources it leaves out.
func FromPendingPlan(s *v1alpha1.Stack) (*Document, int64) {
	p := s.Status.PendingPlan
	if p == nil {
		return nil, 0
	}
	d := &Document{
		APIVersion:    APIVersion,
		ID:            p.ID,
		Namespace:     s.Namespace,
		Name:          s.Name,
		Revision:      p.Revision,
		ProgramDigest: p.ProgramDigest,
		InputsDigest:  p.InputsDigest,
		CreatedAt:     p.CreatedAt.Time,
		Mode:          s.GetApprovalMode(),
		Changes:       p.Changes,
		Resources:     append([]v1alpha1.PlannedResource{}, p.Resources...),
		StackName:     s.GetStackName(),
	}
	return d, max(0, p.Total-int64(len(p.Resources)))
}
