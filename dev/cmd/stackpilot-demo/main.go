// Command stackpilot-demo runs Stackpilot on this machine with a sample
// Stack: as a Pod in a one-node cluster (dev/internal/cluster) when the
// machine allows it, else as a process beside a control plane without nodes.
// `make demo` builds the tools and runs it.
//
// It was the CLI's `stackpilot demo` verb. It is its own binary in the dev
// module so that the CLI users install links no kubelet launcher, image
// builder or control plane.
//
// Exit codes: 0 ok, 1 failure, 2 usage.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code; tests call it
// in-process with captured output.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newDemoCmd(stdout, stderr)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err.Error()}
	})
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "stackpilot-demo: %s\nRun 'stackpilot-demo --help' for usage.\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "stackpilot-demo: %s\n", err)
	return 1
}

// usageError is a wrong command line: exit 2, with a pointer to --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}
