package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	kubeduration "k8s.io/apimachinery/pkg/util/duration"
)

// table prints rows under a header, columns aligned like kubectl's (three
// spaces between columns, the last one unpadded): what every listing verb
// (get, history, events, outputs) prints with -o table. Rows wait for
// flush, which sizes the columns; rows printed after it (get --watch) keep
// those widths, growing a column only when a cell needs it.
type table struct {
	w       io.Writer
	rows    [][]string
	widths  []int
	flushed bool
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.row(header...)
	return t
}

// row adds one row; an empty cell prints "-", so that columns never
// collapse, and tabs or newlines inside a cell become spaces.
func (t *table) row(cells ...string) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = orDash(oneLine(c))
		if i >= len(t.widths) {
			t.widths = append(t.widths, 0)
		}
		t.widths[i] = max(t.widths[i], utf8.RuneCountInString(r[i]))
	}
	t.rows = append(t.rows, r)
	if t.flushed {
		_ = t.flush()
	}
}

func (t *table) flush() error {
	t.flushed = true
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(c)+3))
			}
		}
		b.WriteByte('\n')
	}
	t.rows = nil
	_, err := io.WriteString(t.w, b.String())
	return err
}

// printList writes v as JSON or YAML, or calls tableFn for "table": the one
// switch the listing verbs share.
func printList(w io.Writer, format string, v any, tableFn func() error) error {
	if format == "table" {
		return tableFn()
	}
	return writeStructured(w, format, v)
}

// age is kubectl's AGE: "45s", "3m12s", "5h", "12d", from t to now.
func age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return kubeduration.HumanDuration(now.Sub(t))
}

// ago is age with " ago", for times in sentences.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return age(t, now) + " ago"
}

// oneLine joins a message's lines and squeezes its white space, for cells.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// shorten cuts s to at most n characters, on a word boundary where one is
// near, marking the cut with "...": a table's message column.
func shorten(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n-3]
	cut := string(r)
	if i := strings.LastIndexByte(cut, ' '); i > n/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "..."
}

// infof says something about the output on stderr, such as "nothing to
// list", so that stdout stays what a script parses.
func (c *cli) infof(format string, args ...any) {
	fmt.Fprintf(c.stderr, format+"\n", args...)
}

// shortRevision shortens "main@sha1:<40 hex>" to "main@sha1:<12 hex>".
func shortRevision(rev string) string {
	if i := strings.LastIndex(rev, ":"); i >= 0 && len(rev)-i-1 > 12 {
		return rev[:i+13]
	}
	return rev
}
