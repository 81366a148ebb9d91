package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// isTerminal says whether s is an interactive terminal. Colour, prompts and
// progress lines are only for terminals; the one check lives here.
func isTerminal(s any) bool {
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// warnf prints a warning line on stderr, "warning:" in yellow on a terminal.
func (c *cli) warnf(format string, args ...any) {
	label := "warning:"
	if useColour(c.stderr) {
		label = "\x1b[33mwarning:\x1b[0m"
	}
	fmt.Fprintf(c.stderr, "%s %s\n", label, fmt.Sprintf(format, args...))
}

// readPassword asks on the terminal stdin without echo, the prompt on
// stderr.
func readPassword(stdin any, stderr io.Writer, prompt string) ([]byte, error) {
	f, ok := stdin.(*os.File)
	if !ok {
		return nil, fmt.Errorf("no terminal to ask the password on")
	}
	fmt.Fprint(stderr, prompt)
	p, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(stderr)
	return p, err
}

// useColour: only on a terminal, and never when NO_COLOR is set
// (no-color.org) or TERM is "dumb".
func useColour(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(w)
}
