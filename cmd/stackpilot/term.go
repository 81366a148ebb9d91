package main

import (
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

// useColour: only on a terminal, and never when NO_COLOR is set
// (no-color.org) or TERM is "dumb".
func useColour(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(w)
}
