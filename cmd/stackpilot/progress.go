package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// liveProgress shows a running operation's counts as the controller patches
// them into status.currentOperation.changes. On a terminal it is one line
// rewritten in place; elsewhere (a CI log) it is a new line each time the
// operation or its counts change, never one per poll.
type liveProgress struct {
	w   io.Writer
	tty bool

	shown string // what was printed last, without the elapsed time
	open  bool   // a terminal line is printed and not yet ended
}

func newLiveProgress(w io.Writer) *liveProgress {
	return &liveProgress{w: w, tty: isTerminal(w)}
}

// update shows op as of now; a nil op (nothing running) ends a terminal line.
func (p *liveProgress) update(op *v1alpha1.OperationRecord, now time.Time) {
	if op == nil {
		p.end()
		return
	}
	text := operationProgress(op)
	line := fmt.Sprintf("%s (%s)", text, elapsed(op, now))
	switch {
	case p.tty:
		// \r and "erase to end of line": the new text over the old one.
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.open = true
	case text != p.shown:
		fmt.Fprintln(p.w, line)
	}
	p.shown = text
}

// end finishes a terminal line so that what follows starts on its own.
func (p *liveProgress) end() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}

// operationProgress is "up 1a2b…: 3 created, 1 updated, 0 deleted".
func operationProgress(op *v1alpha1.OperationRecord) string {
	var c v1alpha1.ChangeSummary
	if op.Changes != nil {
		c = *op.Changes
	}
	counts := fmt.Sprintf("%d created, %d updated, %d deleted", c.Create, c.Update, c.Delete)
	if c.Replace > 0 {
		counts += fmt.Sprintf(", %d replaced", c.Replace)
	}
	return fmt.Sprintf("%s %s: %s", op.Type, shortOperationID(op.ID), counts)
}

// shortOperationID is the random tail of an id ("up-20261201-101500-1a2b3c4d"
// gives "1a2b…"), enough to tell operations apart on one line.
func shortOperationID(id string) string {
	tail := id[strings.LastIndexByte(id, '-')+1:]
	if len(tail) > 4 {
		return tail[:4] + "…"
	}
	return tail
}

func elapsed(op *v1alpha1.OperationRecord, now time.Time) string {
	if op.StartedAt.IsZero() {
		return "0s"
	}
	return now.Sub(op.StartedAt.Time).Truncate(time.Second).String()
}
