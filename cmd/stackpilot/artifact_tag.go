package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stackpilot/stackpilot/internal/oci"
)

func (c *cli) newArtifactTagCmd(reg *registryOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "tag oci://REGISTRY/REPO:TAG|@DIGEST NEWTAG",
		Short: "Give an artifact another tag (only the manifest is copied); prints the digest",
		Example: `  stackpilot artifact tag oci://ghcr.io/org/infra:v1.2.0 production
  stackpilot artifact tag oci://ghcr.io/org/infra@sha256:3b1f... v1.2.1`,
		Args: exactArgs(2, "a reference and the new tag"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseRef(args[0], false)
			if err != nil {
				return err
			}
			to := oci.Reference{Repository: ref.Repository, Tag: args[1]}
			if _, err := oci.ParseReference(ociURL(to)); err != nil {
				return usageErrorf("new tag %q: %v", args[1], err)
			}
			cl, err := reg.client(ref.Registry())
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			if err := cl.Tag(ctx, ref, args[1]); err != nil {
				return reg.explain(err)
			}
			dgst, err := cl.Digest(ctx, to)
			if err != nil {
				return fmt.Errorf("tagged, but reading %s back: %w", ociURL(to), reg.explain(err))
			}
			fmt.Fprintln(c.stdout, dgst)
			fmt.Fprintf(c.stderr, "Tagged %s as %s (%s)\n", ociURL(ref), ociURL(to), dgst)
			return nil
		},
	}
}
