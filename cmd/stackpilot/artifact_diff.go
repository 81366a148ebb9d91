package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/internal/oci"
)

func (c *cli) newArtifactDiffCmd(reg *registryOptions) *cobra.Command {
	var path string
	var ignorePaths []string
	cmd := &cobra.Command{
		Use:   "diff oci://REGISTRY/REPO:TAG|@DIGEST --path DIR",
		Short: "List the files that differ between an artifact and a folder; exit 1 when they differ",
		Long: `Compares the artifact's files with DIR packaged the way push packages it
(.sourceignore, Flux's defaults and --ignore-paths apply): content, the exec
bit and link targets count, times and owners do not. Like diff(1), it exits 0
when they are the same, 1 when they differ (one line per file on stdout:
added = only in DIR, removed = only in the artifact, modified), 2 on a usage
error; any other failure is exit 1 with a "stackpilot:" message on stderr.`,
		Example: `  stackpilot artifact diff oci://ghcr.io/org/infra:v1.2.0 --path ./infra`,
		Args:    exactArgs(1, "one reference, oci://REGISTRY/REPO:TAG or @sha256:DIGEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseRef(args[0], false)
			if err != nil {
				return err
			}
			cl, err := reg.client(ref.Registry())
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			changes, err := cl.Diff(ctx, ref, path, oci.BuildOptions{IgnorePaths: ignorePaths})
			if err != nil {
				return reg.explain(err)
			}
			if len(changes) == 0 {
				fmt.Fprintf(c.stderr, "%s and %s have the same files\n", ociURL(ref), path)
				return nil
			}
			for _, ch := range changes {
				fmt.Fprintf(c.stdout, "%-8s  %s\n", ch.Change, ch.Path)
			}
			return &exitError{code: 1, msg: fmt.Sprintf("%s and %s differ in %d file(s); push the folder to update the artifact", ociURL(ref), path, len(changes))}
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "The folder to compare (required).")
	cmd.Flags().StringSliceVar(&ignorePaths, "ignore-paths", nil, "More gitignore-style patterns to leave out, comma-separated (as for push).")
	_ = cmd.MarkFlagRequired("path")
	_ = cmd.MarkFlagDirname("path")
	return cmd
}
