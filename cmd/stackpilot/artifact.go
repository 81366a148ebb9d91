package main

import (
	"github.com/spf13/cobra"
)

// newArtifactCmd groups the verbs on Pulumi programs as OCI artifacts in
// Flux's format (internal/oci); one file per verb: artifact_*.go.
func (c *cli) newArtifactCmd() *cobra.Command {
	cmd := groupCmd("artifact", "Package, push, pull, sign and verify Pulumi programs as OCI artifacts",
		`Pulumi programs as OCI artifacts in Flux's format (the format Flux's
OCIRepository reads and `+"`flux push artifact`"+` writes), which a Stack's
spec.source.oci delivers. Signatures are cosign-compatible, key-based and offline.`)
	return cmd
}
