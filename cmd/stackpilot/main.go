// Command stackpilot is Stackpilot's command-line tool. Each verb is a
// subcommand:
//
//	stackpilot demo [--mode auto|cluster|process] [--once]   run Stackpilot with a sample Stack
//
// It links no test scaffolding (deps_test.go checks) and runs anywhere; only
// demo needs a source checkout, which it says when it is not in one.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// verbs maps each subcommand to its implementation, which gets the arguments
// after the verb and returns the exit code.
var verbs = map[string]struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}{
	"demo": {"run Stackpilot with a sample Stack: as a Pod in a one-node cluster on this machine, or as a process (run it in a clone of the repository)", demoMain},
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	v, ok := verbs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "stackpilot: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return v.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: stackpilot <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, name := range []string{"demo"} {
		fmt.Fprintf(w, "  %-8s %s\n", name, verbs[name].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `stackpilot <command> -h` for a command's flags.")
}
