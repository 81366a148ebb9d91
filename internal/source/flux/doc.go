// Package flux reads the artifacts that Flux's source-controller (or any
// producer of an ExternalArtifact) publishes in a source's .status.artifact,
// and fetches them, digest-verified and size-bounded, into the artifact
// store. It reads the sources as unstructured objects so that the
// controller depends on Flux's API only through its JSON, and runs where
// the Flux CRDs are not installed.
//
// Kind (kind.go) is spec.source.sourceRef for the Stack reconciler, and
// its watch (watch.go) starts the Stacks that follow a source as soon as it
// publishes a new artifact.
package flux
