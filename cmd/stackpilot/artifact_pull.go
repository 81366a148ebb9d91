package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/stackpilot/stackpilot/internal/oci"
)

func (c *cli) newArtifactPullCmd(reg *registryOptions) *cobra.Command {
	var output, maxSize string
	cmd := &cobra.Command{
		Use:   "pull oci://REGISTRY/REPO[:TAG|@DIGEST] --output DIR",
		Short: "Download an artifact and extract it into a new or empty folder; prints the digest",
		Long: `Downloads the artifact's content layer (Flux's, else its only tar layer),
verifies its digest while reading, and extracts it into DIR, which must not
exist or be empty. Extraction refuses absolute paths, "..", links out of DIR
and device files; a refused artifact leaves nothing behind.`,
		Example: `  stackpilot artifact pull oci://ghcr.io/org/infra:v1.2.0 --output ./infra-v1.2.0
  stackpilot artifact pull oci://ghcr.io/org/infra@sha256:3b1f... --output /tmp/infra --max-size 10Mi`,
		Args: exactArgs(1, "one reference, oci://REGISTRY/REPO:TAG or @sha256:DIGEST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseRef(args[0], false)
			if err != nil {
				return err
			}
			q, err := resource.ParseQuantity(maxSize)
			if err != nil || q.Sign() <= 0 {
				return usageErrorf("--max-size %q: want a size such as 100Mi or 500000", maxSize)
			}
			cl, err := reg.client(ref.Registry())
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			p, err := cl.Pull(ctx, ref, output, oci.PullOptions{MaxSize: q.Value()})
			if err != nil {
				return reg.explain(err)
			}
			fmt.Fprintln(c.stdout, p.Digest)
			fmt.Fprintf(c.stderr, "Pulled %s@%s into %s%s\n", ociURL(ref), p.Digest, output,
				describeOrigin(p.Annotations[oci.AnnotationSource], p.Annotations[oci.AnnotationRevision]))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "The folder to extract into; it must not exist or be empty (required).")
	cmd.Flags().StringVar(&maxSize, "max-size", "100Mi", "The largest compressed layer to download (a Kubernetes quantity: 100Mi, 1Gi, bytes).")
	_ = cmd.MarkFlagRequired("output")
	_ = cmd.MarkFlagDirname("output")
	return cmd
}
