// Package oci resolves the OCI references of Stacks (tag, semver range,
// digest) to manifest digests, sharing each lookup between every Stack that
// asks the same question, and fetches verified artifacts into the artifact
// store. Registry access itself is internal/oci; signatures are
// internal/oci/cosign. Kind (kind.go) is spec.source.oci for the Stack
// reconciler: it reads the registry credentials and the verification keys
// the spec names.
package oci
