// Package oci reads and writes Pulumi programs as OCI artifacts in Flux's
// format (the format of `flux push artifact` and source-controller's
// OCIRepository), on go-containerregistry. It is shared by the CLI and the
// controller: references, credentials, a registry client, the reproducible
// layer, push, pull, list, tag and diff.
package oci

// Flux's artifact format.
const (
	ManifestMediaType = "application/vnd.oci.image.manifest.v1+json"
	ConfigMediaType   = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType  = "application/vnd.cncf.flux.content.v1.tar+gzip"

	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
)

// URLPrefix starts every reference the user types.
const URLPrefix = "oci://"
