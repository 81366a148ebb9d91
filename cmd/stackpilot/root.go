package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// cli is one invocation: its streams and the global flags every verb shares.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	kube           kubeOptions
}

// usageError is a wrong command line: exit 2, with a pointer to --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitError ends the command with code and message, for outcomes that are
// not a malfunction but must not exit 0 (diff's "they differ", like diff(1)).
// An empty msg prints nothing more: the command has said it.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageTemplate is cobra's usage, shorter, with "Usage:" on the first line.
const usageTemplate = `Usage: {{if .HasAvailableSubCommands}}{{.CommandPath}} <command> [flags]{{else}}{{.UseLine}}{{end}}{{if gt (len .Aliases) 0}}

Aliases: {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Run '{{.CommandPath}} <command> --help' for a command's flags.{{end}}
`

func (c *cli) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "stackpilot",
		Short: "Stackpilot's command-line tool",
		Long: `stackpilot works with Stackpilot, the operator that delivers Pulumi stacks from Git
and OCI artifacts: see and steer Stacks (get, status, reconcile, suspend, logs),
package and sign programs as artifacts, check drift, review and approve plans,
install and check Stackpilot, and convert Pulumi Kubernetes Operator manifests.

Commands that talk to Kubernetes read the kubeconfig like kubectl does
(--kubeconfig, else $KUBECONFIG, else ~/.kube/config; --context, -n).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a verb, or with one it does not know: usage, exit 2.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(c.stderr)
				_ = cmd.Usage()
				return &exitError{code: 2}
			}
			return unknownCommand(cmd, args[0])
		},
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err.Error()}
	})
	c.kube.addFlags(root.PersistentFlags())
	root.AddCommand(
		c.newArtifactCmd(),
		c.newDriftCmd(),
		c.newPlanCmd(),
		c.newPreviewCmd(),
		c.newApproveCmd(),
		c.newGetCmd(),
		c.newStatusCmd(),
		c.newHistoryCmd(),
		c.newEventsCmd(),
		c.newOutputsCmd(),
		c.newCheckCmd(),
		c.newInstallCmd(),
		c.newUninstallCmd(),
		c.newConvertCmd(),
		c.newPolicyCmd(),
		c.newLogsCmd(),
		c.newDashboardCmd(),
		c.newReconcileCmd(),
		c.newSuspendCmd(),
		c.newResumeCmd(),
		c.newVersionCmd(),
		c.newCompletionCmd(),
	)
	return root
}

// groupCmd is a verb that only holds others (`stackpilot artifact`): without
// a sub-verb or with an unknown one it is a usage error, not cobra's help
// with exit 0.
func groupCmd(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("%s needs a command: %s", verbPath(cmd), strings.Join(subNames(cmd), ", "))
			}
			return unknownCommand(cmd, args[0])
		},
	}
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
	}
	return &usageError{msg}
}

func subNames(cmd *cobra.Command) []string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return names
}

// exactArgs is cobra.ExactArgs with a message naming what is expected, as a
// usage error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %s, got %d argument(s)", verbPath(cmd), what, len(args))
		}
		return nil
	}
}

// verbPath is the command without "stackpilot ", for messages that the
// "stackpilot: " prefix starts.
func verbPath(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// exitCode prints err the one way every verb shares and maps it to the exit
// code: 2 for usage, else 1.
func (c *cli) exitCode(cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(c.stderr, "stackpilot: %s\n", ee.msg)
		}
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		path := "stackpilot"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(c.stderr, "stackpilot: %s\nRun '%s --help' for usage.\n", err, path)
		return 2
	}
	fmt.Fprintf(c.stderr, "stackpilot: %s\n", err)
	return 1
}

// isCobraUsage recognises the usage errors cobra makes itself (its own
// argument checks), which are plain errors.
func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command ") || strings.HasPrefix(s, "unknown flag") ||
		strings.Contains(s, "required flag(s)") || strings.HasPrefix(s, "accepts ") ||
		strings.HasPrefix(s, "invalid argument ")
}
