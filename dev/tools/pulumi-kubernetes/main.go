// Command pulumi-resource-kubernetes is Pulumi's Kubernetes provider, built from a
// pinned provider/v4 module. schema-embed.json and terraform-mapping-embed.json are
// written by ./gen before the build (see the Makefile); they are not committed.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
