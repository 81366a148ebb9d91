package main

import (
	"github.com/spf13/cobra"
)

func (c *cli) newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script",
		Long: `Prints the completion script for the shell. Load it in the current shell with

  source <(stackpilot completion bash)     # bash (needs bash-completion)
  source <(stackpilot completion zsh)      # zsh
  stackpilot completion fish | source      # fish

or write it where the shell loads completions at startup.`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      exactArgs(1, "one shell: bash, zsh or fish"),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(c.stdout, true)
			case "zsh":
				return root.GenZshCompletion(c.stdout)
			case "fish":
				return root.GenFishCompletion(c.stdout, true)
			}
			return usageErrorf("no completion for shell %q: want bash, zsh or fish", args[0])
		},
	}
}
