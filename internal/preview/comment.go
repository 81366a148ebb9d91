// Package preview renders what a pull request's preview found for the
// forge: the comment a Stack keeps on the pull request and the one line of
// its commit status. Pure logic over the runner's result; no value of a
// resource ever reaches it (the result carries property paths only).
package preview

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/stackpilot/stackpilot/internal/runner"
)

// Report is what one preview of one Stack found at one commit.
type Report struct {
	Namespace, Name string
	// Head is the commit previewed.
	Head string
	// Result is the runner's result; nil with Err set when no preview ran.
	Result *runner.Result
	// Message is the result's message with the Stack's secrets scrubbed
	// (the runner's result is never rendered unscrubbed).
	Message string
	// PlanID is the plan the preview kept ("" when none).
	PlanID string
	// PlanURL links to the full plan (the controller's
	// --preview-plan-url-template), "" for none.
	PlanURL string
	// LogsHint is how to read the engine log (a command).
	LogsHint string
	// ReviewStack is the line about the pull request's review stack ("" for
	// none).
	ReviewStack string
}

// Marker is the hidden line that tells this Stack's comment apart from
// others' on the same pull request, so that it is found again and edited.
func Marker(namespace, name string) string {
	return fmt.Sprintf("<!-- stackpilot-preview %s/%s -->", namespace, name)
}

// PlanURL fills a --preview-plan-url-template: {namespace}, {name} and
// {id} are replaced, each escaped for a URL path.
func PlanURL(template, namespace, name, id string) string {
	if template == "" || id == "" {
		return ""
	}
	return strings.NewReplacer("{namespace}", url.PathEscape(namespace), "{name}", url.PathEscape(name), "{id}", url.PathEscape(id)).Replace(template)
}

// Context is the commit status context of a Stack.
func Context(namespace, name string) string {
	return fmt.Sprintf("stackpilot/%s/%s", namespace, name)
}

// Succeeded reports whether the preview ran to its end without error.
func (r Report) Succeeded() bool {
	return r.Result != nil && r.Result.Outcome == runner.OutcomeSucceeded
}

// Description is the commit status's one line: the change counts, or the
// first line of the failure.
func (r Report) Description() string {
	if r.Succeeded() {
		return "preview: " + counts(r.Result.Changes)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(r.Message), "\n")
	if line == "" {
		line = "the preview failed"
	}
	return line
}

func counts(c runner.ChangeCounts) string {
	if c.Create+c.Update+c.Replace+c.Delete == 0 {
		return "no changes"
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{c.Create, "to create"}, {c.Update, "to update"}, {c.Replace, "to replace"}, {c.Delete, "to delete"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}

// Comment renders the comment, within max characters: when the whole table
// of resources does not fit, its rows are cut and the comment says how many
// more there are and where the full plan is.
func (r Report) Comment(max int) string {
	rows := -1 // all
	if r.Result != nil {
		rows = len(r.Result.Resources)
	}
	for {
		body := r.render(rows)
		if len([]rune(body)) <= max || rows <= 0 {
			if len([]rune(body)) > max {
				body = string([]rune(body)[:max-1]) + "…"
			}
			return body
		}
		// Halve the rows until it fits, then it stays short: a plan too
		// long for a comment is read in full through the link.
		rows /= 2
	}
}

// symbols are pulumi preview's marks per step.
var symbols = map[string]string{
	"create": "+", "update": "~", "replace": "+-", "create-replacement": "++", "delete-replaced": "--",
	"delete": "-", "import": "=", "read": ">",
}

func (r Report) render(rows int) string {
	var b strings.Builder
	fmt.Fprintln(&b, Marker(r.Namespace, r.Name))
	fmt.Fprintf(&b, "### Stackpilot preview of Stack `%s/%s`\n\n", r.Namespace, r.Name)
	head := r.Head
	if len(head) > 12 {
		head = head[:12]
	}
	if !r.Succeeded() {
		fmt.Fprintf(&b, "**The preview of `%s` failed.**\n\n", head)
		if msg := strings.TrimSpace(r.Message); msg != "" {
			fmt.Fprintf(&b, "```\n%s\n```\n\n", strings.ReplaceAll(msg, "```", "'''"))
		}
		r.footer(&b)
		return b.String()
	}
	res := r.Result
	fmt.Fprintf(&b, "Previewed `%s`: **%s**.\n\n", head, counts(res.Changes))
	var replaced, deleted []string
	for _, c := range res.Resources {
		switch c.Op {
		case "replace", "create-replacement", "delete-replaced":
			replaced = appendOnce(replaced, name(c.URN))
		case "delete":
			deleted = appendOnce(deleted, name(c.URN))
		}
	}
	if len(replaced) > 0 {
		fmt.Fprintf(&b, "> [!WARNING]\n> **Replaced** (deleted and created again): %s\n\n", code(replaced))
	}
	if len(deleted) > 0 {
		fmt.Fprintf(&b, "> [!CAUTION]\n> **Deleted**: %s\n\n", code(deleted))
	}
	if len(res.Resources) > 0 {
		fmt.Fprintln(&b, "| | resource | type | changes |")
		fmt.Fprintln(&b, "| --- | --- | --- | --- |")
		shown := res.Resources
		if rows >= 0 && rows < len(shown) {
			shown = shown[:rows]
		}
		for _, c := range shown {
			sym := symbols[c.Op]
			if sym == "" {
				sym = c.Op
			}
			paths := c.Paths
			if len(paths) == 0 {
				paths = c.Properties
			}
			fmt.Fprintf(&b, "| `%s` %s | `%s` | `%s` | %s |\n", sym, c.Op, cell(name(c.URN)), cell(c.Type), code(paths))
		}
		if more := len(res.Resources) - len(shown); more > 0 {
			fmt.Fprintf(&b, "\n…and %d more resources: too many for one comment; see the full plan.\n", more)
		}
		fmt.Fprintln(&b)
	}
	if r.ReviewStack != "" {
		fmt.Fprintf(&b, "%s\n\n", r.ReviewStack)
	}
	if len(res.Policy) > 0 {
		fmt.Fprintln(&b, "**Policy findings**")
		fmt.Fprintln(&b)
		for _, f := range res.Policy {
			on := ""
			if f.URN != "" {
				on = " on `" + cell(name(f.URN)) + "`"
			}
			fmt.Fprintf(&b, "- %s `%s`%s: %s\n", f.Enforcement, cell(f.Policy), on, OneLine(f.Message))
		}
		fmt.Fprintln(&b)
	}
	r.footer(&b)
	return b.String()
}

func (r Report) footer(b *strings.Builder) {
	var parts []string
	switch {
	case r.PlanURL != "" && r.PlanID != "":
		parts = append(parts, fmt.Sprintf("[the full plan](%s)", r.PlanURL))
	case r.PlanID != "":
		parts = append(parts, fmt.Sprintf("the full plan: `stackpilot plan %s -n %s --id %s`", r.Name, r.Namespace, r.PlanID))
	}
	if r.LogsHint != "" {
		parts = append(parts, "the engine log: `"+r.LogsHint+"`")
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "<sub>%s</sub>\n", strings.Join(parts, " · "))
	}
}

// name is a URN's last part, the resource's name.
func name(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		return urn[i+2:]
	}
	return urn
}

func appendOnce(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}

// code renders names as inline code, comma separated.
func code(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + cell(n) + "`"
	}
	return strings.Join(out, ", ")
}

// cell keeps a value from breaking a table row or an inline code span.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "`", "'", "\n", " ").Replace(s)
}

// OneLine is s with its runs of white space, newlines included, made one space.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
